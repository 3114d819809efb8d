"""The README is a front page and docs/ the manual: every link leads somewhere, and what the
pages say about settings, figures and examples is what the code does."""

from __future__ import annotations

import re
import shlex

import pytest

from studio.config import from_environment
from tests.conftest import ROOT

DOCS = ROOT / "docs"
PAGES = ["using.md", "running.md", "hosts.md", "sending.md", "api.md", "speed.md", "tests.md",
         "design.md"]
SERVE = ("(command -v tesseract || (apt-get update && apt-get install -y tesseract-ocr"
         " tesseract-ocr-deu tesseract-ocr-fra)) && pip install -e . && studio serve --demo")


def text(path) -> str:  # type: ignore[no-untyped-def]
    return path.read_text(encoding="utf-8")


def prose(markdown: str) -> str:
    """The text outside fenced blocks and inline code, where links are links."""
    outside = re.sub(r"^```.*?^```", "", markdown, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", outside)


def section(markdown: str, heading: str) -> str:
    """From `heading` to the next heading of its level or above."""
    level = heading.split(" ", 1)[0]
    start = markdown.index(f"\n{heading}\n")
    ends = [m.start() for m in re.finditer(rf"\n#{{1,{len(level)}}} ", markdown)
            if m.start() > start]
    return markdown[start:ends[0] if ends else len(markdown)]


def anchors(markdown: str) -> set[str]:
    """GitHub's anchor of each heading outside fenced blocks."""
    found = set()
    for line in re.sub(r"^```.*?^```", "", markdown, flags=re.M | re.S).splitlines():
        if re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_the_readme_is_a_front_page_with_one_picture_the_two_commands_and_the_pages() -> None:
    readme = text(ROOT / "README.md")
    assert len(readme.splitlines()) <= 80
    assert len(re.findall(r"!\[", readme)) == 1
    assert f"```sh\n{SERVE}\n```" in readme
    assert "```sh\nbash tests/run.sh\n```" in readme
    assert "exec bash tests/run.sh" in text(ROOT / ".ci" / "run")  # CI runs what it says
    for page in PAGES:
        assert f"](docs/{page})" in readme, page
        assert (DOCS / page).is_file(), page
    # The code's words stay in the manual, not on the front page.
    for word in ("request_id", "leased to the signed-in actor", "lease"):
        assert word not in readme, word


def test_every_link_in_the_readme_and_the_docs_leads_to_a_file_and_a_heading() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", prose(text(page))):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            if not where.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and anchor not in anchors(text(where)):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_the_settings_table_names_every_setting_the_studio_reads() -> None:
    table = section(text(DOCS / "running.md"), "## Settings")
    read = set()
    for source in [ROOT / "app.py", *sorted((ROOT / "studio").rglob("*.py"))]:
        read |= set(re.findall(r"\bSTUDIO_[A-Z0-9_]+", text(source)))
    assert len(read) > 30
    assert sorted(name for name in read if f"`{name}`" not in table) == []


def test_running_it_keeps_a_place_for_languages() -> None:
    assert "## Languages" in text(DOCS / "running.md")


def test_the_speed_table_names_only_figures_the_bench_makes() -> None:
    bench = "".join(text(source) for source in sorted((ROOT / "bench").glob("*.py")))
    rows = re.findall(r"^\| (`[a-z0-9_]+`(?:, `[a-z0-9_]+`)*) \|", text(DOCS / "speed.md"), re.M)
    keys = [key for row in rows for key in re.findall(r"`([a-z0-9_]+)`", row)]
    assert len(keys) > 30
    assert [key for key in keys if key not in bench] == []


def documented_settings(page: str) -> list[dict[str, str]]:
    """Each shell line of `page` that sets STUDIO_MAIL_FROM, as the environment it makes."""
    found = []
    for block in re.findall(r"^```sh\n(.*?)^```", text(DOCS / page), re.M | re.S):
        env: dict[str, str] = {}
        for line in block.splitlines():
            for word in shlex.split(line, comments=True):
                name, equals, value = word.partition("=")
                if equals and name.startswith("STUDIO_"):
                    env[name] = value
        if "STUDIO_MAIL_FROM" in env:
            found.append(env)
    return found


def test_every_mail_example_in_the_docs_starts_the_studio() -> None:
    examples = documented_settings("sending.md")
    assert len(examples) == 2  # a real mail server, and one on this machine
    for env in examples:
        settings = from_environment(env)
        assert (settings.smtp_url, settings.mail_from) == (
            env["STUDIO_SMTP_URL"], env["STUDIO_MAIL_FROM"])
    assert any("localhost" in env["STUDIO_SMTP_URL"] for env in examples)


@pytest.mark.parametrize("sender", ["studio@localhost", "Studio <studio@localhost>"])
def test_a_sender_on_a_one_label_domain_stops_the_start_naming_one_that_works(
        sender: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        from_environment({"STUDIO_SMTP_URL": "smtp://localhost:8025",
                          "STUDIO_MAIL_FROM": sender})
    message = str(stopped.value)
    assert "'localhost'" in message and "two labels" in message
    suggested = re.search(r"such as (\S+@\S+\.\w+)", message)
    assert suggested is not None, message
    working = from_environment({"STUDIO_SMTP_URL": "smtp://localhost:8025",
                                "STUDIO_MAIL_FROM": suggested.group(1)})
    assert working.mail_from == suggested.group(1)
