"""The web inspector (``mnemon-sm inspect``), through its ASGI app, no browser.

The oracle for what a page shows is the root's public API and what the test wrote itself;
for "nothing writes", the bytes of every file under the root (every row of every table of the
root's database, on PostgreSQL) before and after every page and a recall.
"""

from __future__ import annotations

import hashlib
import html
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from urllib.parse import urlencode

import pytest
from starlette.testclient import TestClient

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.cli.demo import run_demo
from mnemon_sm.cli.main import main
from mnemon_sm.engine.spec import flow_names, load_flow
from mnemon_sm.errors import InvalidInput
from mnemon_sm.flows.audit import AuditRecord
from mnemon_sm.inspector import create_app, open_read_only
from mnemon_sm.inspector.app import COOKIE, check_bind, host_name, shown_location
from mnemon_sm.inspector.html import esc
from mnemon_sm.inspector.live import Standing, highlighted, standings
from mnemon_sm.migrate import migrate
from mnemon_sm.testing.pg_cluster import Cluster

CONFIG = Config(documents_active_limit=6144)  # the demo's plan
HOSTILE = 'Deploys need <script>alert("x")</script> & a "quoted" approval'
TOKEN = "s3cret-token-of-the-inspector"


def seed(path: Path) -> Path:
    """The demo's root (hot memory with a maintenance round, documents with one archived,
    spaces with links, an agent that reviewed) plus an entry full of markup."""
    with redirect_stdout(io.StringIO()):
        run_demo(path)
    with MemoryRoot.open(path, CONFIG) as root:
        root.hot.add("user", HOSTILE)
    return path


#: The last line of a process that died inside a document step (its flow stands in flight).
IN_FLIGHT = {
    "at": 2**41,
    "run": "dead00-3",
    "flow": "document_mutation",
    "from": "idle",
    "event": "create",
    "to": "planning",
}


def died_in_a_step(path: Path) -> Path:
    """Append :data:`IN_FLIGHT` to the root's newest audit segment; that segment."""
    segment = sorted((path / "audit").glob("transitions.*.jsonl"))[-1]
    with segment.open("a") as fh:
        fh.write("\n" + json.dumps(IN_FLIGHT) + "\n")
    return segment


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seed(tmp_path_factory.mktemp("inspect") / "root")


@pytest.fixture
def client(demo_root: Path) -> Iterator[TestClient]:
    root = open_read_only(demo_root, CONFIG)
    try:
        yield TestClient(create_app(root), base_url="http://127.0.0.1:8377")
    finally:
        root.close()


def tree(path: Path) -> dict[str, str]:
    """Every file and directory under ``path``: a file by the SHA-256 of its bytes (hidden
    files, locks and SQLite's side files included), a directory by its name."""
    out: dict[str, str] = {}
    for here, dirs, files in os.walk(path):
        for d in dirs:
            out[os.path.relpath(os.path.join(here, d), path) + "/"] = "dir"
        for f in files:
            full = os.path.join(here, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, path)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def every_page(client: TestClient) -> list[str]:
    """Visit every page (a recall, a related graph and each flow's page included); the
    bodies, in order."""
    bodies = []
    for path in ("/", "/spaces", "/documents", "/agents", "/flows", "/recall"):
        bodies.append(_ok(client, path))
    recall = _ok(client, "/recall?q=staging+deploys&limit=25")
    bodies.append(recall)
    for link in sorted(set(re.findall(r'href="(/spaces/[^"]+/related/[^"]+)"', recall)))[:3]:
        bodies.append(_ok(client, link))
    for name in flow_names():
        bodies.append(_ok(client, f"/flows/{name}"))
    return bodies


def _ok(client: TestClient, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code, response.text[:300])
    return response.text


def text_of(body: str) -> str:
    """A page's text, tags dropped and entities decoded (what a reader sees)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


# -- what the pages show ----------------------------------------------------------------------


def test_hot_memory_shows_every_entry_its_usage_and_the_maintenance_rounds(
    client: TestClient, demo_root: Path
) -> None:
    body = _ok(client, "/")
    with MemoryRoot.open(demo_root, Config(write_enabled=False)) as root:
        snapshot, history = root.hot.snapshot(), root.hot.history()
    seen = text_of(body)
    for entry in snapshot.entries:
        assert entry.content in seen and f'datetime="{entry.created_at}"' in body
    for target, name in (("user", "USER.md"), ("memory", "MEMORY.md")):
        used, limit = snapshot.usage[target]
        assert f'max="{limit}"' in body and f'value="{used}"' in body
        assert f'<label for="u-{name.lower().replace(".", "-")}-usage">' in body
    assert history, "the demo's overflowing add must have compacted"
    for item in history:
        assert item.content in seen and item.fate in seen
    assert f"Revision {snapshot.revision}" in seen


def test_markup_in_memory_is_shown_as_text_never_run(client: TestClient) -> None:
    body = _ok(client, "/")
    assert HOSTILE not in body and "<script>alert" not in body
    assert esc(HOSTILE) in body
    assert HOSTILE in text_of(body)


def test_recall_ranks_like_the_api_and_says_why(client: TestClient, demo_root: Path) -> None:
    body = _ok(client, "/recall?q=staging+deploys&limit=25")
    with MemoryRoot.open(demo_root, Config(write_enabled=False)) as root:
        expected = root.long_term.search("staging deploys", limit=25)
    assert expected.hits, "the demo remembers how staging deploys go"
    rows = re.findall(
        r"<tr><td>(\d+)</td><td>([0-9.]*)</td><td>(.*?)</td><td>(.*?)</td>", body, re.S
    )
    assert [(int(n), score) for n, score, _, _ in rows] == [
        (i, f"{h.hit.score:.3f}") for i, h in enumerate(expected.hits, 1)
    ]
    for (_, _, tier, content), hit in zip(rows, expected.hits, strict=True):
        assert hit.tier in tier and text_of(content).strip() == hit.insight.content
    assert "matched via" in body
    assert 'value="staging deploys"' in body


def test_recall_of_an_unknown_space_is_refused_on_the_page(client: TestClient) -> None:
    body = _ok(client, "/recall?q=anything&space=no-such-space")
    assert "Refused:" in body


def test_spaces_documents_and_agents_show_what_the_api_reads(
    client: TestClient, demo_root: Path
) -> None:
    spaces_page, documents_page = text_of(_ok(client, "/spaces")), _ok(client, "/documents")
    agents_page = text_of(_ok(client, "/agents"))
    with MemoryRoot.open(demo_root, Config(write_enabled=False)) as root:
        for space in root.long_term.spaces():
            status = root.long_term.status(space.id)
            assert space.name in spaces_page and str(status.edge_count) in spaces_page
        records = root.documents.records()
        agents = root.agents()
        statuses = [root.agent_status(a) for a in agents]
    active = [r for r in records if r.status == "active"]
    archived = [r for r in records if r.status == "archived"]
    assert active and archived
    # least recently used first, by the rule itself: last access, then last update
    expected = sorted(active, key=lambda r: (r.last_accessed_at, r.updated_at))
    active_table = documents_page.split("<h2>Archived")[0]
    shown = re.findall(r"<tr><td>\d+</td><td>[^<]*</td><td>([^<]+)</td>", active_table)
    assert shown == [r.id for r in expected]
    for record in archived:
        assert record.relative_path in documents_page and record.archive_summary is not None
        for space in record.memory_body_ids:  # its cold reference, found by a recall there
            query = urlencode({"q": record.title, "space": space})
            assert f'href="/recall?{esc(query)}"' in documents_page
            found = text_of(_ok(client, f"/recall?{query}"))
            assert f'Archived document "{record.title}"' in found
            assert Path(record.relative_path).name in found
    total = sum(r.size_bytes for r in active)
    assert f'value="{total}"' in documents_page and 'max="6144"' in documents_page
    assert agents == ("demo-agent",)
    status = statuses[0]
    assert status["state"] in agents_page
    assert f"{status['activity']['score']} of the {status['activity']['threshold']}" in agents_page
    assert status["lastReview"] is not None and status["lastReview"]["action"] in agents_page


def test_a_related_graph_draws_the_links_of_an_insight(client: TestClient) -> None:
    recall = _ok(client, "/recall?q=staging+deploys&limit=25")
    links = re.findall(r'href="(/spaces/[^"]+/related/[^"]+)"', recall)
    drawn = [_ok(client, link) for link in links]
    graphs = [b for b in drawn if "-->|" in text_of(b)]
    assert graphs, "some recalled insight of the demo is linked"
    assert all('<pre class="mermaid">' in b and "/static/mermaid.min.js" in b for b in graphs)


def test_an_unknown_insight_space_or_flow_is_an_error_page(client: TestClient) -> None:
    for path, said in (
        ("/spaces/default/related/not-an-insight", "no active insight has id"),
        ("/spaces/nospace/related/x", "unknown memory body"),
    ):
        response = client.get(path)
        assert response.status_code == 400 and said in response.text
    assert client.get("/flows/no_such_flow").status_code == 404
    assert client.get("/nowhere").status_code == 404


# -- live flows ---------------------------------------------------------------------------------


def _transition(at: int, run: str, flow: str, source: str, event: str, target: str) -> AuditRecord:
    return AuditRecord(at, run, flow, event, source=source, target=target)


def _outcome(at: int, run: str, flow: str, event: str, state: str) -> AuditRecord:
    return AuditRecord(at, run, flow, event, outcome="ok", state=state)


def test_standings_are_each_process_newest_state() -> None:
    flow, resting = "hot_memory_mutation", {"hot_memory_mutation": ("ready", "closed")}
    records = [
        _transition(1, "a1-1", flow, "ready", "add", "deciding"),
        _transition(2, "a1-1", flow, "deciding", "decided", "committing"),
        _outcome(3, "a1-1", flow, "add", "ready"),
        _transition(4, "b2-7", flow, "ready", "add", "deciding"),  # b2 died mid-step
        _transition(5, "a1-2", flow, "ready", "replace", "deciding"),
    ]
    found = standings(records, resting)[flow]
    assert found == [
        Standing("a1", "deciding", 5, "a1-2", False),
        Standing("b2", "deciding", 4, "b2-7", False),
    ]
    found = standings([*records, _outcome(6, "a1-2", flow, "replace", "ready")], resting)[flow]
    assert found[0] == Standing("a1", "ready", 6, "a1-2", True)


def test_the_diagram_marks_busy_and_resting_states_of_its_own_flow_only() -> None:
    spec = load_flow("hot_memory_mutation").spec
    stands = [
        Standing("a", "deciding", 2, "a-1", False),
        Standing("b", "ready", 1, "b-1", True),
        Standing("c", "not_a_state; click x", 1, "c-1", True),
    ]
    source = ["stateDiagram-v2"]
    drawn = highlighted(source, stands, spec.state_defs).splitlines()
    assert "    class deciding busy" in drawn and "    class ready resting" in drawn
    assert not any("not_a_state" in line for line in drawn)


def test_the_flows_pages_show_the_audit_log_and_each_state_where_a_flow_stands(
    tmp_path: Path,
) -> None:
    path = seed(tmp_path / "root")
    segment = died_in_a_step(path)
    assert "planning" in load_flow("document_mutation").spec.state_defs
    root = open_read_only(path, CONFIG)
    try:
        client = TestClient(create_app(root), base_url="http://127.0.0.1:8377")
        overview = text_of(_ok(client, "/flows"))
        assert "planning (in flight, process dead00)" in overview
        assert "idle → planning on create" in overview
        page = _ok(client, "/flows/document_mutation")
        assert "class planning busy" in page
        # the demo's hot-memory flow, read from the file: its last line is the close
        lines = [json.loads(x) for x in segment.read_text().splitlines() if x.strip()]
        mine = [x for x in lines if x["flow"] == "hot_memory_mutation"]
        assert (mine[-1]["event"], mine[-1]["to"]) == ("close", "closed")
        assert "closed" in load_flow("hot_memory_mutation").spec.resting
        last = [x for x in mine if "outcome" in x][-1]
        hot = _ok(client, "/flows/hot_memory_mutation")
        assert re.search(r"class ([a-z_]+,)*closed(,[a-z_]+)* resting", hot)
        assert f"{last['event']} answered {last['outcome']}" in text_of(hot)
        assert 'http-equiv="refresh"' in _ok(client, "/flows?live=1")
    finally:
        root.close()


# -- nothing writes -----------------------------------------------------------------------------


def test_visiting_every_page_and_recalling_writes_nothing_under_the_root(
    tmp_path: Path,
) -> None:
    path = seed(tmp_path / "root")
    before = tree(path)
    root = open_read_only(path, CONFIG)
    try:
        every_page(TestClient(create_app(root), base_url="http://127.0.0.1:8377"))
    finally:
        root.close()
    assert tree(path) == before


def _rows(cluster: Cluster, dbname: str) -> dict[str, str]:
    """Every table of the database by the MD5 of its rows, sorted by their text."""
    tables = cluster.psql(
        "SELECT string_agg(quote_ident(table_name), ',') FROM information_schema.tables "
        "WHERE table_schema = 'public'",
        dbname,
    ).split(",")
    assert len(tables) >= 4
    return {
        t: cluster.psql(
            f"SELECT count(*) || ':' || coalesce(md5(string_agg(x::text, '|' "
            f"ORDER BY x::text)), '') FROM {t} x",
            dbname,
        )
        for t in tables
    }


def test_on_postgresql_every_row_is_the_same_after_every_page(
    tmp_path: Path, postgres_cluster: Cluster
) -> None:
    source = seed(tmp_path / "root")
    dbname = "inspect_rows"
    postgres_cluster.create_database(dbname)
    url = postgres_cluster.url("inspected", dbname)
    migrate(source, url)
    before = _rows(postgres_cluster, dbname)
    root = open_read_only(url, CONFIG)
    try:
        bodies = every_page(TestClient(create_app(root), base_url="http://127.0.0.1:8377"))
    finally:
        root.close()
    assert _rows(postgres_cluster, dbname) == before
    assert HOSTILE in text_of(bodies[0]) and "matched via" in bodies[6]


def test_the_app_answers_reads_only_and_refuses_a_writable_root(
    client: TestClient, demo_root: Path
) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert client.request(method, "/").status_code == 405
        assert client.request(method, "/recall?q=x").status_code == 405
    with MemoryRoot.open(demo_root, CONFIG) as writable, pytest.raises(InvalidInput):
        create_app(writable)


# -- access -------------------------------------------------------------------------------------


def test_every_answer_forbids_framing_sniffing_and_foreign_scripts(client: TestClient) -> None:
    for path in ("/", "/flows/recall", "/static/style.css", "/nowhere"):
        headers = client.get(path).headers
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    ("host", "served"),
    [
        ("127.0.0.1:8377", True),
        ("localhost:8377", True),
        ("[::1]:8377", True),
        ("evil.example:8377", False),
        ("127.0.0.1.evil.example", False),
        ("", False),
    ],
)
def test_a_foreign_host_header_is_refused(client: TestClient, host: str, served: bool) -> None:
    response = client.get("/", headers={"host": host})
    assert (response.status_code == 200) is served


def test_the_header_shows_the_home_directory_as_a_tilde() -> None:
    assert shown_location("/home/ann/.mnemon", "/home/ann") == "~/.mnemon"
    assert shown_location("/home/ann", "/home/ann/") == "~"
    assert shown_location("/home/anna/.mnemon", "/home/ann") == "/home/anna/.mnemon"
    assert (
        shown_location("postgresql://u@h/db?root=r", "/home/ann") == "postgresql://u@h/db?root=r"
    )


def test_host_names_are_read_without_their_port() -> None:
    assert host_name("[::1]:80") == "::1" and host_name("localhost:1") == "localhost"
    assert host_name("::1") == "::1" and host_name("example.org") == "example.org"


def test_another_address_than_loopback_needs_a_long_token() -> None:
    for loopback in ("127.0.0.1", "::1", "localhost", "127.0.0.5"):
        check_bind(loopback, None)
    for remote in ("0.0.0.0", "192.168.1.4", "example.org", "::"):
        with pytest.raises(InvalidInput):
            check_bind(remote, None)
        check_bind(remote, TOKEN)
    with pytest.raises(InvalidInput):
        check_bind("0.0.0.0", "short")


def test_with_a_token_every_request_carries_it(demo_root: Path) -> None:
    root = open_read_only(demo_root, CONFIG)
    try:
        app = create_app(root, token=TOKEN, hosts=("*",))
        client = TestClient(app, base_url="http://192.168.1.4:8377")
        assert client.get("/").status_code == 401
        assert client.get("/static/style.css").status_code == 401
        assert client.get("/", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert client.get("/?token=wrong-token-of-the-inspector").status_code == 401
        first = client.get(f"/recall?q=staging&token={TOKEN}", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/recall?q=staging"
        assert "httponly" in first.headers["set-cookie"].lower()
        assert "samesite=strict" in first.headers["set-cookie"].lower()
        assert client.cookies.get(COOKIE) == TOKEN
        assert client.get("/flows").status_code == 200  # the cookie carries it
        with pytest.raises(InvalidInput):
            create_app(root, hosts=("*",))
    finally:
        root.close()


def test_the_command_refuses_a_remote_address_without_a_token_before_opening_the_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "never"
    with pytest.raises(SystemExit) as stopped:
        main(["inspect", "--root", str(root), "--host", "0.0.0.0"])
    assert stopped.value.code != 0
    out = capsys.readouterr()
    assert "token" in (out.out + out.err)
    assert not root.exists()


def test_any_value_shown_is_escaped_once() -> None:
    assert esc('<a href="x">&') == "&lt;a href=&quot;x&quot;&gt;&amp;"
    assert esc(esc("<b>")) == "&lt;b&gt;"
    assert esc(None) == "" and esc(3) == "3"


def test_the_command_serves_the_root_until_stopped(demo_root: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    before = tree(demo_root)
    command = [sys.executable, "-m", "mnemon_sm.cli", "inspect", "--root", str(demo_root)]
    server = subprocess.Popen([*command, "--port", str(port)], stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        announced = server.stderr.readline()  # said once the server listens
        assert f"on http://127.0.0.1:{port}/ (read-only" in announced
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/agents", timeout=30) as r:
            assert "demo-agent" in r.read().decode()
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(20) == 0
    assert tree(demo_root) == before


def test_without_the_extra_the_command_names_it_and_the_package_imports_neither(
    tmp_path: Path,
) -> None:
    from tests._fresh_python import python_lines

    imported = "print(sorted(m for m in sys.modules if m.split('.')[0] in WEB))\n"
    code = "import sys\nWEB = ('starlette', 'uvicorn')\nimport mnemon_sm\n" + imported
    assert python_lines(code) == ["[]"]
    code = (
        "import json, sys, contextlib, io\n"
        "WEB = ('starlette', 'uvicorn')\n"
        "from mnemon_sm.cli.main import main\n"
        "err = io.StringIO()\n"
        "with contextlib.redirect_stderr(err):\n"
        "    try:\n"
        f"        main(['inspect', '--root', {str(tmp_path / 'r')!r}])\n"
        "    except SystemExit as exc:\n"
        "        print('exit', exc.code)\n"
        "print(json.loads(err.getvalue())['error']['message'])\n" + imported
    )
    assert python_lines(code, without=["starlette", "uvicorn"]) == [
        "exit 1",
        "the inspector needs the [inspect] extra: pip install 'mnemon-sm[inspect]' "
        "(cannot import starlette)",
        "[]",
    ]
    assert not (tmp_path / "r").exists()


def test_long_lists_are_cut_and_say_so(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every page costs a bounded amount however much the root holds: long tables and graphs
    are cut, nearest or newest first, and the page says where the rest is."""
    from mnemon_sm.inspector.pages import documents, hot, spaces

    monkeypatch.setattr(documents, "ROWS", 1)
    monkeypatch.setattr(hot, "ROUNDS_SHOWN", 0)
    monkeypatch.setattr(spaces, "DRAWN", 3)
    monkeypatch.setattr(spaces, "LISTED", 2)
    page = _ok(client, "/documents")
    assert "The first 1 of 2" in page and page.count("<tr><td>1</td>") == 1
    assert "rounds; `mnemon-sm hot history` lists them all" in text_of(_ok(client, "/"))
    recall = _ok(client, "/recall?q=staging+deploys&limit=25")
    link = re.findall(r'href="(/spaces/[^"]+/related/[^"]+)"', recall)[0]
    graph = _ok(client, link)
    source = text_of(graph.split('<pre class="mermaid">')[1].split("</pre>")[0])
    assert len(re.findall(r"^\s+n\d+\[", source, re.M)) == 4  # the center and the nearest 3
    table_part = graph.split("Related insights")[1]
    assert table_part.count("<tr><td>") == 2


def test_a_corrupt_source_or_a_torn_audit_tail_leaves_the_other_pages_usable(
    tmp_path: Path,
) -> None:
    """Bad bytes in ``memories.json`` make the hot-memory page an error page (a typed error,
    400), not a crash; a torn last audit line (a power loss) is skipped; every other page
    answers, and nothing is written."""
    path = seed(tmp_path / "root")
    (path / "runtime" / "memories.json").write_bytes(b'{"version": 1, "entr\xff')
    segment = sorted((path / "audit").glob("transitions.*.jsonl"))[-1]
    with segment.open("ab") as fh:
        fh.write(b'\n{"at":1,"run":"torn-1","flow":"recall","fr')
    before = tree(path)
    root = open_read_only(path, CONFIG)
    try:
        client = TestClient(create_app(root), base_url="http://127.0.0.1:8377")
        broken = client.get("/")
        assert broken.status_code == 400 and "CorruptStore" in broken.text
        assert 'aria-current="page"' in broken.text  # still the inspector's page
        for page in ("/spaces", "/documents", "/agents", "/flows", "/flows/recall"):
            assert client.get(page).status_code == 200, page
        assert "torn-1" not in client.get("/flows").text
    finally:
        root.close()
    assert tree(path) == before
