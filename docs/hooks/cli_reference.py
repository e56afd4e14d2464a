"""MkDocs hook: the command-line reference, generated from senti's Typer app when the site is built.

A page holding the marker `<!-- senti-cli-reference -->` gets, in its place, every command with its help and a
table of its options, read from the same click objects that `senti COMMAND --help` prints, so the reference
cannot drift from the program.
"""

from __future__ import annotations

MARKER = "<!-- senti-cli-reference -->"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _command(cmd, path: str) -> list[str]:
    """One command's section: its help, its usage line and its options, each as `--help` shows it."""
    from typer._click import Context  # Typer carries its own copy of click

    ctx = Context(cmd, info_name=path)
    out = [f"## `{path}`", "", _cell(cmd.help or ""), "", "```", cmd.get_usage(ctx), "```", ""]
    records = [p.get_help_record(ctx) for p in cmd.params]
    records = [r for r in records if r]
    if records:
        out += ["| option | what it does |", "|---|---|"]
        out += [f"| `{_cell(names)}` | {_cell(help_text)} |" for names, help_text in records]
        out.append("")
    return out


def reference() -> str:
    """The whole reference as Markdown: one section per command, groups expanded."""
    import typer

    from senti.cli import app

    root = typer.main.get_command(app)
    lines: list[str] = []

    def walk(cmd, path: str) -> None:
        if hasattr(cmd, "commands"):
            for name in sorted(cmd.commands):
                sub = cmd.commands[name]
                if not sub.hidden:
                    walk(sub, f"{path} {name}")
            if cmd is not root and cmd.callback is not None:
                lines.extend(_command(cmd, path))
            return
        lines.extend(_command(cmd, path))

    walk(root, "senti")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())
