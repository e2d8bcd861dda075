"""Library-file references: what a referenced file offers (its ports and its own references),
read without building it, and cycles of files that reference each other."""

from __future__ import annotations

from pathlib import Path

from cosim.errors import ModelError
from cosim.modelfile.reader import MAX_DEPTH, Doc, compose, read_text

__all__ = ["LibraryFiles"]


class LibraryFiles:
    """Outlines of library files, each read once per load, and the files known to be acyclic."""

    def __init__(self):
        self._outlines: dict[Path, tuple | None] = {}
        self._acyclic: set[Path] = set()

    def outline(self, file: Path) -> tuple[tuple[str, ...], tuple[str, ...], list[Path]] | None:
        """``(inputs, outputs, referenced files)`` of library file ``file``, read without
        building anything; None when it is not a readable library file (loading it will
        report why)."""
        if file in self._outlines:
            return self._outlines[file]
        self._outlines[file] = None
        try:
            text, _, base = read_text(file, "reference")
        except ModelError:
            return None
        doc = Doc(str(file), base)
        compose(doc, text)
        data = doc.data
        if not isinstance(data, dict) or "subsystem" not in data:
            return None
        refs: list[Path] = []

        def walk(blocks, depth=0):
            for e in blocks.values() if isinstance(blocks, dict) and depth < MAX_DEPTH else ():
                if not isinstance(e, dict):
                    continue
                r = e.get("reference")
                if isinstance(r, str) and r.endswith((".yaml", ".yml")):
                    refs.append((Path(r) if Path(r).is_absolute() else base / r).resolve())
                if e.get("type") == "Subsystem":
                    walk(e.get("blocks"), depth + 1)

        blocks = data.get("blocks") if isinstance(data.get("blocks"), dict) else {}
        walk(blocks)
        kinds = [(n, e.get("type")) for n, e in blocks.items() if isinstance(e, dict)]
        self._outlines[file] = (tuple(n for n, t in kinds if t == "Inport"),
                                tuple(n for n, t in kinds if t == "Outport"), refs)
        return self._outlines[file]

    def cycle(self, file: Path, chain: tuple) -> list[Path] | None:
        """A cycle of library file references through ``file`` after ``chain``, or None."""
        if file in chain:
            return [*chain[chain.index(file):], file]
        if file in self._acyclic or len(chain) > MAX_DEPTH:
            return None
        outline = self.outline(file)
        for ref in outline[2] if outline else ():
            found = self.cycle(ref, chain + (file,))
            if found:
                return found
        self._acyclic.add(file)
        return None
