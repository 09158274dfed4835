"""English and Simplified Chinese: every word a person reads in a template is marked for
translation, the Chinese catalogue has a translation for every marked message (and
compiles), and a browser or an API client asking for Chinese gets Chinese.

The template check reads each template as Django's own lexer does: the text between tags,
less what is inside ``{% translate %}``, ``{% blocktranslate %}`` and comments, parsed as
HTML; its words (and the human attributes: title, aria-label, placeholder, alt, a button's
value) must be none but names. Quoted sentences handed to tags (``{% include ... with
empty="..." %}``) must be ``_("...")``. Each failure names the file, the line and the text.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.template.base import Lexer, TokenType
from django.test import Client
from rest_framework.test import APIClient

from ..support.paths import REPO

CATALOGUE = REPO / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"

# Words that stay as they are in every language: names of products, formats and units.
NAMES = {
    "Caldera", "Ray", "PyTorch", "KubeRay", "Volcano", "Kubernetes", "Swagger",
    "CSV", "cpu", "gpu", "ms",
}  # fmt: skip

# Attributes a person reads (or hears, from a screen reader, or sees in a dialog); and any
# ``data-`` attribute holding words for a script to show (not JSON, not a name).
HUMAN_ATTRIBUTES = {"title", "aria-label", "aria-description", "aria-valuetext", "placeholder",
                    "alt", "label", "hx-confirm", "hx-prompt"}  # fmt: skip
# Elements whose text is code, a name or a header as typed, not prose.
CODE_ELEMENTS = {"code", "pre", "kbd", "samp"}
VOID_ELEMENTS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                 "source", "track", "wbr"}  # fmt: skip
# A word: two letters or more (a date format's "Y-m-d H:i" has none).
WORD = re.compile(r"[^\W\d_]{2,}")
# Between tags a template's text holds this where a tag or a variable was: never a letter.
HOLE = "\ue000"
# Tag bodies whose text is not read as the page's own words.
OPAQUE = {"comment": "endcomment", "blocktranslate": "endblocktranslate",
          "blocktrans": "endblocktrans"}  # fmt: skip
QUOTED = re.compile(r"""(_\()?("[^"]*"|'[^']*')""")


def templates() -> list[Path]:
    """The project's templates and its apps' own (``<app>/templates``)."""
    found = sorted((REPO / "templates").rglob("*.html"))
    for app in sorted(REPO.iterdir()):
        if (app / "apps.py").exists() and (app / "templates").is_dir():
            found += sorted((app / "templates").rglob("*.html"))
    return found


def skeleton(source: str) -> tuple[str, list[tuple[int, str]]]:
    """The template's text with every tag, variable and comment (and everything inside an
    opaque block) replaced by HOLEs, newlines kept so lines stay where they are; and the
    untranslated sentences given to tags: (line, literal)."""
    parts: list[str] = []
    literals: list[tuple[int, str]] = []
    closing: str | None = None
    for token in Lexer(source).tokenize():
        if token.token_type == TokenType.TEXT and closing is None:
            parts.append(token.contents)
            continue
        if token.token_type == TokenType.BLOCK:
            name = token.contents.split()[0] if token.contents.split() else ""
            if closing is not None:
                closing = None if name == closing else closing
            elif name in OPAQUE:
                closing = OPAQUE[name]
            elif name not in {"translate", "trans"}:
                literals += untranslated(token.lineno, token.contents)
        elif token.token_type == TokenType.VAR and closing is None:
            literals += untranslated(token.lineno, token.contents)
        parts.append(HOLE + "\n" * token.contents.count("\n"))
    return "".join(parts), literals


def untranslated(line: int, contents: str) -> list[tuple[int, str]]:
    """Quoted literals with a space and a word that are not ``_("...")``: sentences."""
    return [
        (line, literal)
        for marked, literal in QUOTED.findall(contents)
        if not marked and " " in literal and WORD.search(literal)
    ]


def shown_by_a_script(name: str, value: str) -> bool:
    """A ``data-`` attribute with words in it (``data-confirm="Cancel the jobs?"``), not
    JSON, a URL or one name."""
    return (
        name.startswith("data-")
        and " " in value.strip()
        and not value.lstrip().startswith(("{", "[", "/", "http"))
    )


class Words(HTMLParser):
    """The words of an HTML text that a person reads: (line, text) of each piece."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[int, str]] = []
        self.open: list[tuple[str, bool]] = []  # (element, its text is code)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        line = self.getpos()[0]
        for name, value in attrs:
            if value and (name in HUMAN_ATTRIBUTES or shown_by_a_script(name, value)):
                self.found.append((line, value))
        if tag == "input" and attributes.get("type") in {"submit", "button", "reset"}:
            self.found.append((line, attributes.get("value") or ""))
        if tag not in VOID_ELEMENTS:
            code = tag in CODE_ELEMENTS or "mono" in (attributes.get("class") or "").split()
            self.open.append((tag, code or any(c for _, c in self.open)))

    def handle_endtag(self, tag):
        for index in range(len(self.open) - 1, -1, -1):
            if self.open[index][0] == tag:
                del self.open[index:]
                break

    def handle_data(self, data):
        if not (self.open and self.open[-1][1]):
            self.found.append((self.getpos()[0], data))


def unmarked(path: Path, root: Path = REPO) -> list[str]:
    """``file:line: text`` of each piece of text with words not marked for translation."""
    text, literals = skeleton(path.read_text())
    reader = Words()
    reader.feed(text)
    reader.close()
    name = path.relative_to(root)
    problems = [
        f"{name}:{line}: {' '.join(piece.replace(HOLE, '…').split())}"
        for line, piece in reader.found
        if any(word not in NAMES for word in WORD.findall(piece))
    ]
    return problems + [f"{name}:{line}: {literal} (a tag's argument)" for line, literal in literals]


@pytest.mark.parametrize("path", templates(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_word_of_a_template_is_marked_for_translation(path):
    assert unmarked(path) == []


def test_the_check_finds_unmarked_words_and_passes_marked_ones(tmp_path):
    page = tmp_path / "templates" / "page.html"
    page.parent.mkdir()
    page.write_text(
        '{% load i18n %}<h1>{% translate "Queues" %}</h1>\n'
        '<p>{% blocktranslate trimmed %}Ahead: {{ n }}{% endblocktranslate %}</p>\n'
        '{% comment %}Not shown{% endcomment %}<code>ElasticQuotaTree</code> Caldera\n'
        '<a href="{% url "x" %}" title="Open it">{{ job.name }}</a>\n'
        '<button aria-label="{% translate "Close" %}" data-ask="Really cancel?">×</button>\n'
        '{% include "x.html" with empty="No jobs yet." %}\n'
        '{% include "x.html" with empty=_("No jobs yet.") %}<span>Pending</span>\n'
    )  # fmt: skip
    found = [problem.split(": ", 1)[1] for problem in unmarked(page, tmp_path)]
    assert found == ["Open it", "Really cancel?", "Pending", '"No jobs yet." (a tag\'s argument)']


def missing_from_catalogue(fresh: Path) -> list[str]:
    """The messages of ``fresh`` (a catalogue just made from the code) that the committed
    catalogue lacks or leaves untranslated or fuzzy, as msgcmp finds them: each one's
    msgid (msgcmp names only the line of its msgstr in ``fresh``)."""
    compared = gettext_tool("msgcmp", CATALOGUE, fresh)
    lines = fresh.read_text().splitlines()
    found = []
    for number in re.findall(rf"^{re.escape(str(fresh))}:(\d+): ", compared.stderr, re.M):
        start = int(number) - 1
        while not lines[start].startswith("msgid "):
            start -= 1
        end = start + 1
        while lines[end].startswith('"'):
            end += 1
        found.append(" ".join(lines[start:end]))
    assert found or compared.returncode == 0, compared.stderr
    return found


def gettext_tool(*arguments: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(argument) for argument in arguments], capture_output=True, text=True, timeout=120
    )


def test_the_catalogue_translates_every_marked_message_and_compiles(tmp_path):
    """``make messages-update`` run on a copy of the project (without its catalogues) finds
    the messages marked today; the committed catalogue has each, translated, none fuzzy."""
    copy = tmp_path / "project"
    shutil.copytree(
        REPO, copy, symlinks=True,
        ignore=shutil.ignore_patterns(".venv", ".git", ".caldera", "staticfiles", "locale",
                                      "node_modules", "__pycache__", "test-results"),
    )  # fmt: skip
    made = subprocess.run(
        ["make", "--silent", "messages-update", f"PY={sys.executable}"],
        cwd=copy, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    assert missing_from_catalogue(copy / CATALOGUE.relative_to(REPO)) == []
    for kind in ("--only-fuzzy", "--untranslated"):
        left = gettext_tool("msgattrib", kind, "--no-obsolete", CATALOGUE)
        assert left.returncode == 0 and left.stdout == "", f"{kind}:\n{left.stdout}"
    compiled = gettext_tool("msgfmt", "--check", "--output-file", tmp_path / "django.mo", CATALOGUE)
    assert compiled.returncode == 0, compiled.stderr


def test_the_catalogue_check_finds_a_message_missing_from_it(tmp_path):
    """The comparison above fails on a marked message the catalogue lacks."""
    fresh = tmp_path / "fresh.po"
    fresh.write_text(CATALOGUE.read_text() + '\nmsgid "A message nobody translated"\nmsgstr ""\n')
    assert missing_from_catalogue(fresh) == ['msgid "A message nobody translated"']


@pytest.mark.django_db
def test_a_browser_asking_for_chinese_gets_the_login_and_account_pages_in_chinese(member):
    browser = Client(headers={"accept-language": "zh-CN,zh;q=0.9,en;q=0.5"})
    login = browser.get("/accounts/login/").content.decode()
    assert '<html lang="zh-hans"' in login
    assert "<h1>登录</h1>" in login and "用户名" in login and "Log in" not in login

    browser.force_login(member)
    account = browser.get("/account/").content.decode()
    assert "<h1>你的账户" in account and "访问令牌" in account and "新建令牌" in account
    assert "Access tokens" not in account

    english = Client(headers={"accept-language": "en-GB,en;q=0.8"})
    assert "<h1>Log in</h1>" in english.get("/accounts/login/").content.decode()


@pytest.mark.django_db
def test_a_missing_page_is_explained_in_chinese(member):
    browser = Client(headers={"accept-language": "zh-Hans"})
    browser.force_login(member)
    answer = browser.get("/no/such/page/")
    assert answer.status_code == 404
    page = answer.content.decode()
    assert '<html lang="zh-hans"' in page and "未找到" in page and "/no/such/page/" in page


@pytest.mark.django_db
def test_the_api_refuses_in_chinese_when_the_client_asks(member, api):
    anonymous = APIClient(headers={"accept-language": "zh-Hans"})
    refused = anonymous.get("/api/v1/tokens/")
    assert refused.status_code in (401, 403)
    assert refused.json()["detail"] == "身份认证信息未提供。"

    client = api(member)
    client.credentials(HTTP_ACCEPT_LANGUAGE="zh-Hans", **client._credentials)
    missing = client.post("/api/v1/tokens/", {}, format="json")
    assert missing.status_code == 400
    assert missing.json()["name"] == ["该字段是必填项。"]
    # Caldera's own refusals too.
    beyond = client.post("/api/v1/tokens/", {"name": "ci", "right": "admin"}, format="json")
    assert beyond.status_code == 400 and beyond.json() == {"right": ["admin 仅限管理员"]}

    english = api(member).post("/api/v1/tokens/", {}, format="json")
    assert english.json()["name"] == ["This field is required."]


@pytest.mark.django_db
def test_a_form_refused_by_the_csrf_check_is_explained_in_chinese(member):
    browser = Client(enforce_csrf_checks=True, headers={"accept-language": "zh-CN"})
    browser.force_login(member)
    answer = browser.post("/account/", {"name": "ci-main", "right": "read"})
    assert answer.status_code == 403
    page = answer.content.decode()
    assert "此表单已过期" in page and "你输入的内容（2 个字段）" in page and "重新发送" in page
