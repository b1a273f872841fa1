#!/usr/bin/python3
"""Check the links of the built manual and of the repository's Markdown, offline.

    scripts/check-links.py docs/book README.md ARCHITECTURE.md

For a folder: every relative href and src of every HTML page in it must name a file in it,
and a #fragment an id (or name) on that page. For a Markdown file: every relative link must
name a file of the repository. Links to other sites (http:, https:, mailto:) are not fetched:
there is no network here, and the manual must not depend on one. Exit 0 when every link
resolves, 1 when one does not (one line each: the page, the link, why), 2 for bad input.
"""
import html.parser
import os
import re
import sys
import urllib.parse

EXTERNAL = ("http:", "https:", "mailto:", "data:", "javascript:")


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links = []
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("id", "name") and v:
                self.ids.add(v)
            if k in ("href", "src") and v is not None:
                self.links.append(v)


def parse(path, cache):
    if path not in cache:
        p = Page()
        with open(path, encoding="utf-8", errors="replace") as f:
            p.feed(f.read())
        cache[path] = p
    return cache[path]


def check_book(root):
    bad = []
    cache = {}
    pages = []
    for d, _, files in os.walk(root):
        pages += [os.path.join(d, f) for f in files if f.endswith(".html")]
    if not pages:
        return [f"{root}: no HTML pages (run mdbook build docs first)"]
    for page in sorted(pages):
        if os.path.basename(page) == "404.html":
            continue  # served by a web server from any depth: its links are absolute by design
        for link in parse(page, cache).links:
            if link.startswith(EXTERNAL) or link.startswith("//"):
                continue
            url = urllib.parse.urlsplit(link)
            if url.path.startswith("/"):
                bad.append(f"{page}: {link}: an absolute path leaves the book")
                continue
            target = os.path.normpath(os.path.join(os.path.dirname(page),
                                                   urllib.parse.unquote(url.path))) \
                if url.path else page
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if not os.path.exists(target):
                bad.append(f"{page}: {link}: no such file in the book")
                continue
            frag = urllib.parse.unquote(url.fragment)
            if frag and target.endswith(".html") and frag not in parse(target, cache).ids:
                bad.append(f"{page}: {link}: no id '{frag}' on that page")
    return bad


MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def check_markdown(path):
    bad = []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold no links
    for link in MD_LINK.findall(text):
        if link.startswith(EXTERNAL) or link.startswith("#"):
            continue
        target = os.path.normpath(os.path.join(os.path.dirname(path), link.split("#")[0]))
        if not os.path.exists(target):
            bad.append(f"{path}: {link}: no such file")
    return bad


def main(argv):
    if not argv:
        print("check-links: name the built book's folder and/or Markdown files to check",
              file=sys.stderr)
        return 2
    bad = []
    for arg in argv:
        if os.path.isdir(arg):
            bad += check_book(arg)
        elif arg.endswith(".md") and os.path.isfile(arg):
            bad += check_markdown(arg)
        else:
            print(f"check-links: {arg}: neither a folder nor a Markdown file; give the built "
                  "book (docs/book) or a .md file", file=sys.stderr)
            return 2
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
