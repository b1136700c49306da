"""MkDocs hooks: the reference pages generated from the code at build time.

Three placeholders are filled in ``on_page_markdown``:

- ``{{ settings_table }}``: every field of ``Settings`` and ``ClientSettings``
  (``TRIBAL_<NAME>``, default, the field's docstring);
- ``{{ cli_reference }}``: the typer app, through Typer's own Markdown generator
  (what ``typer tribal_memory.interfaces.cli utils docs`` prints);
- ``{{ http_reference }}``: the app's OpenAPI schema, rendered as Markdown.

The schema itself is added to the site as ``reference/openapi.json``. Nothing is
written into ``docs/``, so ``mkdocs serve`` does not rebuild in a loop. This file
sits outside the package and above every layer, so it may import ``interfaces/``;
the tests import it to check the tables (``tests/test_docs_site.py``).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

PLACEHOLDER = re.compile(r"\{\{\s*(settings_table|cli_reference|http_reference)\s*\}\}")
HTTP_METHODS = ("get", "post", "put", "patch", "delete")


# --- configuration ------------------------------------------------------------------------


def _default_text(field: Any) -> str:
    if field.default_factory is not None:
        doc = (field.default_factory.__doc__ or "").strip().split("\n")[0]
        return doc.rstrip(".") or "derived"
    default = field.default
    if default is None or default == "" or default == ():
        return "unset"
    return f"`{default}`"


def _one_line(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def settings_rows() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) for every setting, server settings first."""
    from tribal_memory.base.config import ClientSettings, Settings

    rows = []
    for model in (Settings, ClientSettings):
        for name, field in model.model_fields.items():
            meaning = _one_line(field.description or "")
            rows.append((f"`TRIBAL_{name.upper()}`", _default_text(field), meaning))
    return rows


def settings_table() -> str:
    """The configuration table as Markdown."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    lines += [f"| {var} | {default} | {meaning} |" for var, default, meaning in settings_rows()]
    return "\n".join(lines)


# --- CLI ----------------------------------------------------------------------------------


def _escape_html_outside_code(line: str) -> str:
    parts = re.split(r"(`+[^`]*`+)", line)
    return "".join(
        p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;") for p in parts
    )


@cache
def cli_reference() -> str:
    """The CLI reference as Markdown, headings starting at level 2."""
    import typer
    import typer.cli

    from tribal_memory.interfaces.cli import app

    command = typer.main.get_command(app)
    ctx = typer.Context(command)
    ctx.ensure_object(dict)
    text = typer.cli.get_docs_for_click(obj=command, ctx=ctx, name="tribal-memory")
    out, fenced = [], False
    for line in text.strip().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            if line.startswith("#"):
                line = "#" + line
            line = _escape_html_outside_code(line)
        out.append(line)
    return "\n".join(out)


# --- HTTP ---------------------------------------------------------------------------------


@cache
def openapi_schema() -> dict[str, Any]:
    """The app's OpenAPI document, built without opening a store."""
    from tribal_memory.base.config import Settings
    from tribal_memory.interfaces.api.app import create_app

    app = create_app(Settings(data_dir=Path("/nonexistent"), auth="off"))
    return dict(app.openapi_schema.to_schema())


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " or ".join(_type(s) for s in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    if kind is None:
        return "any"
    fmt = schema.get("format")
    return f"{kind} ({fmt})" if fmt else str(kind)


def _notes(schema: dict[str, Any]) -> str:
    notes = []
    if "default" in schema:
        notes.append(f"default `{json.dumps(schema['default'])}`")
    for key, label in (
        ("minimum", ">="),
        ("maximum", "<="),
        ("minLength", "length >="),
        ("maxLength", "length <="),
        ("maxItems", "items <="),
    ):
        if key in schema:
            notes.append(f"{label} {schema[key]}")
    if schema.get("description"):
        notes.append(_one_line(schema["description"]))
    return "; ".join(notes)


def _body_schema(content: dict[str, Any]) -> str:
    parts = []
    for media, body in content.items():
        schema = body.get("schema")
        parts.append(f"`{media}`" + (f": {_type(schema)}" if schema else ""))
    return ", ".join(parts)


def _docstring_markdown(text: str) -> str:
    """A handler docstring as Markdown: Google-style sections become bulleted lists."""
    out: list[str] = []
    in_section = False
    for line in text.strip().splitlines():
        if re.fullmatch(r"(Args|Returns|Raises|Yields|Note|Notes):", line.strip()):
            out += ["", f"**{line.strip()}**", ""]
            in_section = True
        elif in_section and line.startswith("    ") and not line.startswith("     "):
            out.append("- " + line.strip())
        elif in_section and line.startswith("     "):
            out[-1] += " " + line.strip()
        else:
            in_section = in_section and bool(line.strip())
            out.append(line)
    return _escape_html_outside_code("\n".join(out))


def _operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        lines += [f"*{op['summary']}*", ""]
    if op.get("description"):
        lines += [_docstring_markdown(op["description"]), ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | notes |", "|---|---|---|---|---|"]
        for p in params:
            schema = p.get("schema", {})
            note = _notes({**schema, "description": p.get("description", "")})
            required = "yes" if p.get("required") else ""
            lines.append(f"| `{p['name']}` | {p['in']} | {_type(schema)} | {required} | {note} |")
        lines.append("")
    body = op.get("requestBody")
    if body:
        lines += [f"Request body: {_body_schema(body.get('content', {}))}", ""]
    responses = op.get("responses", {})
    if responses:
        lines += ["| status | meaning | body |", "|---|---|---|"]
        for status, response in responses.items():
            description = _one_line(response.get("description", ""))
            body_text = _body_schema(response.get("content", {}))
            lines.append(f"| {status} | {description} | {body_text} |")
        lines.append("")
    return lines


def _component(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [_escape_html_outside_code(schema["description"].strip()), ""]
    properties = schema.get("properties")
    if not properties:
        return [*lines, f"Type: {_type(schema)}", ""]
    required = set(schema.get("required", []))
    lines += ["| field | type | required | notes |", "|---|---|---|---|"]
    for field, sub in properties.items():
        lines.append(
            f"| `{field}` | {_type(sub)} | {'yes' if field in required else ''} | {_notes(sub)} |"
        )
    return [*lines, ""]


@cache
def http_reference() -> str:
    """The HTTP reference as Markdown: operations grouped by tag, then the schemas."""
    schema = openapi_schema()
    groups: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in schema["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                op = item[method]
                tag = (op.get("tags") or ["other"])[0]
                groups.setdefault(tag, []).append((path, method, op))
    lines = []
    for tag, ops in groups.items():
        lines += [f"## {tag.capitalize()}", ""]
        for path, method, op in ops:
            lines += _operation(path, method, op)
    lines += ["## Schemas", ""]
    for name, component in sorted(schema.get("components", {}).get("schemas", {}).items()):
        lines += _component(name, component)
    return "\n".join(lines)


# --- MkDocs events ------------------------------------------------------------------------


def _fill(match: re.Match[str]) -> str:
    return {
        "settings_table": settings_table,
        "cli_reference": cli_reference,
        "http_reference": http_reference,
    }[match.group(1)]()


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Fill the placeholders of a page."""
    return PLACEHOLDER.sub(_fill, markdown)


def on_files(files: Any, config: Any, **_: Any) -> Any:
    """Add the OpenAPI document to the site as ``reference/openapi.json``."""
    from mkdocs.structure.files import File

    content = json.dumps(openapi_schema(), indent=2, sort_keys=True) + "\n"
    files.append(File.generated(config, "reference/openapi.json", content=content))
    return files
