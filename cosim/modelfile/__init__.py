"""Model files: safe YAML reading, the JSON Schema, building models from files, writing them.
"""
