"""Write the source patches that carry the package's own logic, patches/<release>/NNNN-<fix>.patch.

Two fixes hand upstream the package's logic itself: ``normalize-turns``
(data/normalize/normalize.py's rules; on <= 0.7 also data/render/render.py's tool-call arguments as
mappings) and ``local-render`` (0.8+: data/render/render.py's request handling and
data/render/content_format.py's content-format detection, checked against a real vLLM server). A
patch cannot import this package, so each adds one module to upstream's tree, built from the
package's source by tools/inline_rules.py (the definitions it needs, exactly as written), plus a
small hand-written change hooking it in: ``tools/patch_hooks/<release>/NNNN-<fix>.patch``, a
``git format-patch`` mail whose message is the patch's. The other patches (mask-probe, row-guard,
messages-column) are upstream-specific and kept by hand in patches/<release>/.

For each release this lays out the release's source (tools/release_source.py), applies the
series in order with ``git am`` and, at a generated fix, applies its hook, adds the module and
writes the commit out again with ``git format-patch``::

    python tools/make_patches.py                  # every release with a folder in patches/
    python tools/make_patches.py 0.9.0 --check    # exit 1 if a committed patch is stale
    python tools/make_patches.py 0.9.0 --installed  # the importable speculators, no download

(``make patches``; tests/test_patches.py fails when a committed patch differs from this.)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
HOOKS = TOOLS / "patch_hooks"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import inline_rules  # noqa: E402 - tools/ is not a package
import release_source  # noqa: E402

NORMALIZE = "speculators_qwen_compat.data.normalize.normalize"
RENDER = "speculators_qwen_compat.data.render.render"
DATA_GENERATION = "src/speculators/data_generation"
REGENERATE = "python tools/make_patches.py"


@dataclass(frozen=True)
class Generated:
    """The module a fix adds to upstream's tree, and what it takes from the package."""

    path: str  # in upstream's repository
    summary: str  # the docstring's first line
    roots: tuple[tuple[str, tuple[str, ...]], ...]


def generated(fix: str, release: str) -> Generated | None:
    """The module ``fix`` adds on ``release``; None for a fix kept by hand."""
    if fix == "normalize-turns":
        names = ("normalize_conversation", "BadConversation", "_State", "_normalize")
        names += ("_drop_trailing_turns",)
        roots: tuple[tuple[str, tuple[str, ...]], ...] = ((NORMALIZE, names),)
        if not _renders(release):  # the template is applied in _preprocess_batch
            roots += ((RENDER, ("arguments_as_mappings",)),)
        summary = "Conversation rules: any training row's turns as chat-template messages."
        return Generated(f"{DATA_GENERATION}/conversation_rules.py", summary, roots)
    if fix == "local-render":
        # request_ids is the whole local render (render_locally calls it, with text_ids as
        # the encoder); request_messages shapes what the HTTP path sends
        names = ("request_ids", "text_ids", "request_messages")
        summary = "A render request answered the way vLLM 0.32's render endpoint answers it."
        return Generated(f"{DATA_GENERATION}/render_rules.py", summary, ((RENDER, names),))
    return None


def _renders(release: str) -> bool:
    from packaging.version import Version

    return Version(release) >= Version("0.8")


def module_text(spec: Generated) -> str:
    """The generated module: a docstring saying where it comes from, then the definitions."""
    inlined = inline_rules.inline([(module, list(names)) for module, names in spec.roots])
    sources = ", ".join(path for path, _ in inlined.sections)
    docstring = (
        f"{spec.summary}\n\n"
        f"Generated from speculators_qwen_compat ({sources}) by its tools/make_patches.py:\n"
        "the definitions below are that package's, unchanged, so a patched speculators and the\n"
        "package treat every conversation alike. Change them there and regenerate the patches.\n"
    )
    return inline_rules.render_module(docstring, inlined)


def series(release: str) -> list[tuple[str, Path]]:
    """(file name, source) of every patch of the release, in order: a hook for a generated
    fix, else the committed patch."""
    names = {p.name: p for p in release_source.release_patches(release)}
    names.update({p.name: p for p in release_source.release_patches(release, HOOKS)})
    return sorted(names.items())


def _fix_name(file_name: str) -> str:
    return file_name.split("-", 1)[1].removesuffix(".patch")


def build(release: str, workdir: Path, installed: Path | None = None) -> dict[str, str]:
    """The text of every generated patch of ``release``, by file name."""
    tree = workdir / f"speculators-{release}"
    release_source.lay_out(release, tree, git=True, installed=installed)
    out: dict[str, str] = {}
    for name, source in series(release):
        _git(tree, "am", "--keep-cr", str(source))
        spec = generated(_fix_name(name), release)
        if spec is None:
            continue
        if source.parent == release_source.PATCHES / release:
            raise RuntimeError(f"{name}: a generated fix needs its hook in {HOOKS / release}")
        module = tree / spec.path
        if module.exists():
            raise RuntimeError(f"{name}: upstream already has {spec.path}")
        module.write_text(module_text(spec), "utf-8")
        _git(tree, "add", spec.path)
        _git(tree, "commit", "--quiet", "--amend", "--no-edit")
        out[name] = _git(
            tree,
            "format-patch", "-1", "--stdout", "--zero-commit", "--no-signature", "--stat=100",
            "--no-color", "--abbrev=7", "HEAD",
        )  # fmt: skip
    return out


def _git(cwd: Path, *args: str) -> str:
    """git with no user or system configuration (diff prefixes, abbreviations and the like
    must not change the output), committing as the mail's author did."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    identity = ["-c", "user.name=make_patches", "-c", "user.email=make_patches@localhost"]
    result = subprocess.run(
        ["git", *identity, *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {cwd}: {result.stderr.strip()}")
    return result.stdout


def stale(release: str, installed: Path | None = None) -> list[str]:
    """The generated patches of ``release`` whose committed file differs from what is built."""
    with tempfile.TemporaryDirectory() as work:
        built = build(release, Path(work), installed)
    folder = release_source.PATCHES / release
    return [
        name
        for name, text in built.items()
        if not (folder / name).is_file() or (folder / name).read_text("utf-8") != text
    ]


def releases() -> list[str]:
    return sorted(p.name for p in release_source.PATCHES.iterdir() if p.is_dir())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("release", nargs="*", help="releases (default: every patches/ folder)")
    parser.add_argument("--check", action="store_true", help="write nothing; 1 if stale")
    parser.add_argument(
        "--installed", action="store_true", help="lay out the importable speculators"
    )
    args = parser.parse_args(argv)
    installed = release_source.importable_package(parser) if args.installed else None
    status = 0
    for release in args.release or releases():
        if args.check:
            for name in stale(release, installed):
                print(f"patches/{release}/{name} is stale: run {REGENERATE} {release}")
                status = 1
            continue
        with tempfile.TemporaryDirectory() as work:
            for name, text in build(release, Path(work), installed).items():
                (release_source.PATCHES / release / name).write_text(text, "utf-8")
                print(f"wrote patches/{release}/{name}")
    return status


if __name__ == "__main__":
    sys.exit(main())
