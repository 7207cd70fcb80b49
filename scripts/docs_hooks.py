"""MkDocs hooks: the reference pages generated at build time (mkdocs.yml ``hooks:``).

Three kinds of page are written from the code, never by hand, so they cannot drift:

- ``reference/endpoints/<name>.md`` and ``reference/middleware/<name>.md``: every option of
  one endpoint or middleware, its type, default and meaning, read from the module's
  ``OPTIONS`` declaration through `mq_bridge.config.schema.catalog()` -- the same source
  as `mq_bridge.config_schema()` -- followed by the module's docstring;
- ``reference/cli.md``: the help of every ``mq-bridge`` and ``twainmq`` subcommand, from
  their argparse parsers (`build_parser()`);
- the nav entries of those pages, put where mkdocs.yml names ``reference/endpoints/index.md``
  and ``reference/middleware/index.md``.

The pages exist only in the built site (``File.generated``); `render_*` are plain functions
of the schema, so a test can call them without a build. A generated page that a hand-written
page links to has a *stand-in* at its path in docs/ (`render_stand_in`: what the page holds
and where to read the same without a build), so the link also resolves on GitHub and in a
checkout; the build replaces the stand-in with the generated page.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from markdown.extensions.toc import slugify
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

#: The nav placeholders that the hook expands into one entry per plugin.
_SECTIONS = {"endpoint": "reference/endpoints", "middleware": "reference/middleware"}
#: The first line of a stand-in (see the module docstring).
STAND_IN = (
    "<!-- stand-in: the site replaces this file with the page scripts/docs_hooks.py makes -->"
)
_REPOSITORY = Path(__file__).resolve().parents[1]


def _catalog() -> Any:
    from mq_bridge.config.schema import catalog

    return catalog()


def _plugins(kind: str) -> dict[str, Any]:
    found = _catalog()
    plugins: dict[str, Any] = found.endpoints if kind == "endpoint" else found.middlewares
    return plugins


# --- options tables --------------------------------------------------------------------------


def _type_of(schema: dict[str, Any]) -> str:
    """A short reading of a JSON Schema type: ``string``, ``integer | null``, ``one of a, b``."""
    if "enum" in schema:
        return "one of " + ", ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(dict.fromkeys(_type_of(part) for part in schema[key]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(kind)
    if kind == "array":
        return f"list of {_type_of(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        values = schema["additionalProperties"]
        if isinstance(values, dict) and values:
            return f"map of {_type_of(values)}"
    return str(kind or "any")


def _cell(text: str) -> str:
    """Text that stays in one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _default_of(schema: dict[str, Any], required: bool) -> str:
    if required:
        return "**required**"
    if "default" not in schema:
        return ""
    return _cell(f"`{json.dumps(schema['default'])}`")


def _rows(schema: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, ...]]:
    """(name, type, default, meaning) per option; nested option objects as ``parent.child``."""
    required = set(schema.get("required", ()))
    for name, option in schema.get("properties", {}).items():
        meaning = option.get("description", "")
        if option.get("writeOnly"):
            meaning += " *Secret: redacted in logs, errors and the console.*"
        yield (
            f"`{prefix}{name}`",
            _cell(_type_of(option)),
            _default_of(option, name in required),
            _cell(meaning),
        )
        if option.get("type") == "object" and option.get("properties"):
            yield from _rows(option, prefix=f"{prefix}{name}.")


def options_table(schema: dict[str, Any]) -> str:
    """The Markdown table of every option of one declaration's JSON Schema."""
    rows = list(_rows(schema))
    if not rows:
        return "This takes no options (`{}` or `null`).\n"
    lines = ["| option | type | default | meaning |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _roles(plugin: Any) -> str:
    if plugin.kind == "middleware":
        sides = [("input", plugin.can_input), ("output", plugin.can_output)]
        return "wraps " + " and ".join(side for side, yes in sides if yes) + " endpoints"
    sides = [("input", plugin.can_input), ("output", plugin.can_output)]
    return "as " + " and ".join(side for side, yes in sides if yes)


def render_plugin_page(plugin: Any, guide: str | None) -> str:
    """The reference page of one endpoint or middleware (`guide`: its hand-written page)."""
    doc = (plugin.module.__doc__ or "").strip()
    summary = doc.splitlines()[0] if doc else ""
    key = f"{{{plugin.name}: {{...}}}}"
    parts = [
        f"# `{plugin.name}` ({plugin.kind})\n",
        f"{summary}\n" if summary else "",
        f"Config key `{key}`, {_roles(plugin)}; its schema is `$defs/{plugin.def_name}` "
        "in `mq-bridge schema`. This page is generated from the module's `OPTIONS` "
        f"declaration (`{plugin.module.__name__}`) when the site is built.\n",
    ]
    if guide:
        parts.append(f"The guide, with semantics and examples: [{plugin.name}]({guide}).\n")
    parts += ["## Options\n", options_table(plugin.schema)]
    if doc:
        parts += ["## From the module's docstring\n", "```text\n" + doc + "\n```\n"]
    return "\n".join(part for part in parts if part)


def render_index(kind: str, plugins: dict[str, Any]) -> str:
    title = "Endpoints" if kind == "endpoint" else "Middleware"
    lines = [
        f"# {title}: every option\n",
        f"One page per registered {kind}, generated from its option declaration (the same "
        "source as `mq_bridge.config_schema()` and `mq-bridge schema`).\n",
        "| name | summary |",
        "|---|---|",
    ]
    for name, plugin in plugins.items():
        summary = ((plugin.module.__doc__ or "").strip().splitlines() or [""])[0]
        lines.append(f"| [`{name}`]({name}.md) | {_cell(summary)} |")
    return "\n".join(lines) + "\n"


# --- the command line ------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """`parser` and every subcommand parser below it, depth first, in declaration order."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for child in action.choices.values():
                if id(child) not in seen:  # aliases share a parser
                    seen.add(id(child))
                    yield from _subcommands(child)


def render_cli_page() -> str:
    from mq_bridge.cli import build_parser as bridge_parser
    from twainmq.cli import build_parser as twainmq_parser

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: fix it for the page
    try:
        parts = [
            "# Command line\n",
            "Generated from the argument parsers (`mq_bridge.cli.build_parser()` and "
            "`twainmq.cli.build_parser()`) when the site is built: each block is the command's "
            "`--help`.\n",
        ]
        for title, build in (("mq-bridge", bridge_parser), ("twainmq", twainmq_parser)):
            parts.append(f"## `{title}`\n")
            for parser in _subcommands(build()):
                if parser.prog != title:
                    parts.append(f"### `{parser.prog}`\n")
                parts.append("```text\n" + parser.format_help().rstrip() + "\n```\n")
        return "\n".join(parts)
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


# --- stand-ins -------------------------------------------------------------------------------


def generated_pages() -> list[str]:
    """The path, under docs/, of every page the build generates."""
    pages = ["reference/cli.md"]
    for kind, folder in _SECTIONS.items():
        pages += [f"{folder}/index.md"] + [f"{folder}/{name}.md" for name in _plugins(kind)]
    return pages


def _source_link(path: Path, page: str) -> str:
    """`path` (a file of the repository) as a Markdown link from docs/`page`."""
    shown = path.relative_to(_REPOSITORY).as_posix()
    up = "../" * (page.count("/") + 1)
    return f"[`{shown}`]({up}{shown})"


def render_stand_in(page: str) -> str:
    """The stand-in of the generated `page` (a path under docs/): one paragraph."""
    built = f"`site/{page[:-3]}.html`"
    if page == "reference/cli.md":
        title, what = "Command line", "the `--help` of every `mq-bridge` and `twainmq` command"
        elsewhere = "`mq-bridge COMMAND --help` and `twainmq COMMAND --help` print the same."
    elif page.endswith("/index.md"):
        kind = "endpoint" if page.startswith(_SECTIONS["endpoint"]) else "middleware"
        title = f"{'Endpoints' if kind == 'endpoint' else 'Middleware'}: every option"
        what = f"a list of every registered {kind}, each with a page of its options"
        elsewhere = "`mq-bridge schema` prints every option of every one as JSON Schema."
    else:
        kind = "endpoint" if page.startswith(_SECTIONS["endpoint"]) else "middleware"
        plugin = _plugins(kind)[page.rsplit("/", 1)[1][:-3]]
        source = Path(inspect.getsourcefile(plugin.options) or plugin.module.__file__)
        title = f"`{plugin.name}` ({kind}): every option"
        what = (
            f"a table of every option of `{plugin.name}` (type, default, meaning), read from "
            f"its declaration in {_source_link(source, page)}, and the module's docstring"
        )
        elsewhere = f"`mq-bridge schema` prints the same options as `$defs/{plugin.def_name}`."
    return (
        f"{STAND_IN}\n# {title}\n\n"
        f"This page is generated when the site is built (`make docs`, then open {built}): "
        f"{what}. This file only holds its place in the repository. {elsewhere}\n"
    )


# --- the hooks -------------------------------------------------------------------------------


def _guide(name: str, docs_dir: str, package: str = "") -> str | None:
    """The link from a generated page to the endpoint's hand-written guide, if it has one.

    docs/endpoints/<name>.md, else the page of the endpoint package that registers it
    (`package`: ``redis`` for ``redis_streams``, which shares the redis package and page),
    else its section of docs/design.md ("The `name` endpoint"); the strict build checks
    that the page and the anchor exist.
    """
    for page in dict.fromkeys(page for page in (name, package) if page):
        if (Path(docs_dir) / "endpoints" / f"{page}.md").is_file():
            return f"../../endpoints/{page}.md"
    design = (Path(docs_dir) / "design.md").read_text(encoding="utf-8")
    heading = re.search(rf"^## (The `{re.escape(name)}` endpoint.*)$", design, re.MULTILINE)
    if heading:
        return f"../../design.md#{slugify(heading[1].replace('`', ''), '-')}"
    return None


def _package(plugin: Any) -> str:
    """The endpoint package a registered endpoint's module lives in (``mq_bridge.endpoints.
    redis.streams`` -> ``redis``), or "" for a module directly under ``endpoints``."""
    parts = plugin.module.__name__.split(".")
    return parts[2] if len(parts) > 3 else ""


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Expand each ``reference/<kind>/index.md`` nav entry into one entry per plugin, and
    list every endpoint guide (docs/endpoints/*.md) that mkdocs.yml does not name yet."""
    for kind, folder in _SECTIONS.items():
        entries = [{"Overview": f"{folder}/index.md"}]
        entries += [{name: f"{folder}/{name}.md"} for name in _plugins(kind)]
        config["nav"] = _replace(config["nav"], f"{folder}/index.md", entries)
    _add_unlisted_guides(config["nav"], Path(config["docs_dir"]))
    return config


def _add_unlisted_guides(nav: list[Any], docs_dir: Path) -> None:
    """A new docs/endpoints/<name>.md joins the "Endpoints" section without a yml edit."""
    section = next(
        item["Endpoints"] for item in nav if isinstance(item, dict) and "Endpoints" in item
    )
    listed = {value for entry in section for value in entry.values()}
    for page in sorted((docs_dir / "endpoints").glob("*.md")):
        if f"endpoints/{page.name}" not in listed:
            section.append({page.stem: f"endpoints/{page.name}"})


def _replace(nav: Any, target: str, entries: list[dict[str, str]]) -> Any:
    if isinstance(nav, list):
        return [_replace(item, target, entries) for item in nav]
    if isinstance(nav, dict):
        return {
            title: entries if value == target else _replace(value, target, entries)
            for title, value in nav.items()
        }
    return nav


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages to the build, in place of their stand-ins."""
    pages = {"reference/cli.md": render_cli_page()}
    for kind, folder in _SECTIONS.items():
        plugins = _plugins(kind)
        pages[f"{folder}/index.md"] = render_index(kind, plugins)
        for name, plugin in plugins.items():
            guide = (
                _guide(name, config["docs_dir"], _package(plugin)) if kind == "endpoint" else None
            )
            pages[f"{folder}/{name}.md"] = render_plugin_page(plugin, guide)
    for page, content in pages.items():
        stand_in = files.get_file_from_path(page)
        if stand_in is not None:
            files.remove(stand_in)
        files.append(File.generated(config, page, content=content))
    return files
