"""A nested configuration object with command-line overrides (``--trainer.max_iters=300``),
in the style of small research codebases."""

import ast


class Config:
    """Attributes set by keyword; nested configs print indented; ``merge_from_args`` applies
    ``--a.b=value`` overrides, parsing the value as a Python literal when it is one."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def __str__(self):
        lines = []
        for key, value in self.__dict__.items():
            if isinstance(value, Config):
                lines.append(f"{key}:")
                lines.extend("    " + line for line in str(value).splitlines())
            else:
                lines.append(f"{key}: {value}")
        return "\n".join(lines)

    def merge_from_args(self, args):
        for arg in args:
            assert arg.startswith("--"), f"expected --key=value, got {arg}"
            key, value = arg[2:].split("=", 1)
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                pass
            *path, leaf = key.split(".")
            node = self
            for part in path:
                node = getattr(node, part)
            assert hasattr(node, leaf), f"{key} is not a setting"
            setattr(node, leaf, value)
