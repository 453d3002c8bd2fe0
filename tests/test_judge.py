"""The LLM judge client against a real chat-completions server on 127.0.0.1 (no network beyond loopback).

The fake server's behaviour is steered by markers inside the graded completion (``<<429>>``, ``<<500x2>>``, ...),
so concurrent items do not interfere.
"""
from __future__ import annotations

import json
import logging
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from helpers.judge.rubric import (
    GRADE_TEMPLATE,
    INSTRUCT_CATEGORIES,
    INSTRUCT_GRADE_TEMPLATE,
    GradeParseError,
    JudgeConfigError,
    judge_status,
    parse_grades,
)
from helpers.judge.client import JudgeClient, JudgeConfig
from helpers.judge.runs import grade_completions

KEY_ENV = "STORYBENCH_TEST_JUDGE_KEY"
SECRET = "sk-test-SECRET-0123456789abcdef"
GOOD = "Grammar: 8/10\nCreativity: 6/10\nConsistency: 7/10\nPlot: 5/10\nAge group: B"


class FakeJudge:
    """A tiny OpenAI-compatible server with scripted failures."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = 0
        self.counts: dict[tuple[str, str], int] = {}
        self.inflight = 0
        self.max_inflight = 0
        self.auth: list[str | None] = []
        self.reasks = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep pytest output clean
                pass

            def _send(self, code, body, headers=()):
                data = body.encode() if isinstance(body, str) else body
                self.send_response(code)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                with fake.lock:
                    fake.inflight += 1
                    fake.max_inflight = max(fake.max_inflight, fake.inflight)
                try:
                    self._handle()
                finally:
                    with fake.lock:
                        fake.inflight -= 1

            def _handle(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/chat/completions":
                    return self._send(404, '{"error": "no such route"}')
                auth = self.headers.get("Authorization")
                msgs = body["messages"]
                first, last = msgs[0]["content"], msgs[-1]["content"]
                turn = "grade" if (last.startswith(("Now, grade", "Your grades")) or "First write" in last) else "assess"
                markers = set(re.findall(r"<<(\w+)>>", first))
                with fake.lock:
                    fake.calls += 1
                    fake.auth.append(auth)
                    if last.startswith("Your grades"):
                        fake.reasks += 1
                    n = fake.counts[(first, turn)] = fake.counts.get((first, turn), 0) + 1
                    total = sum(v for (f, _), v in fake.counts.items() if f == first)
                if "slow" in markers:
                    time.sleep(0.25)
                if "timeout" in markers and total == 1:
                    time.sleep(1.2)
                if "401" in markers:
                    return self._send(401, '{"error": "bad key"}')
                if "always500" in markers:
                    return self._send(500, f'{{"error": "internal", "echo": "{auth}"}}')
                if "429" in markers and total == 1:
                    return self._send(429, '{"error": "rate limited"}', [("Retry-After", "3")])
                if "500x2" in markers and total <= 2:
                    return self._send(500, '{"error": "boom"}')
                if "garbled" in markers and total == 1:
                    return self._send(200, "<html>definitely not json")
                if "nochoices" in markers and total == 1:
                    return self._send(200, '{"object": "chat.completion", "choices": []}')
                if turn == "assess":
                    content = "The completion is grammatical and mostly consistent with the beginning."
                elif "range" in markers and n == 1:
                    content = "Grammar: 11/10\nCreativity: 6/10\nConsistency: 7/10\nPlot: 5/10\nAge group: B"
                elif "missing" in markers and n == 1:
                    content = "Grammar: 8/10, Creativity: 6/10, Consistency: 7/10. Age group: B"
                elif "jsonreply" in markers:
                    content = 'Sure! ```json\n{"grammar": 9, "creativity": "4/10", "consistency": 3, "plot sense": 2, "age_group": "C"}\n```'
                elif "instructions for writing" in first:  # the instruct protocol: one more grade
                    content = GOOD if ("noinstr" in markers and n == 1) else GOOD.replace("Age group", "Instructions: 4/10\nAge group")
                else:
                    content = GOOD
                reply = {"id": "x", "object": "chat.completion", "model": body["model"],
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
                self._send(200, json.dumps(reply), [("Content-Type", "application/json")])

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = FakeJudge()
    yield s
    s.close()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


def make_cfg(server, tmp_path, **kw):
    base = dict(base_url=server.url, model="fake-judge", api_key_env=KEY_ENV, cache_dir=tmp_path / "cache",
                max_retries=3, timeout=5, backoff_base=0.001, backoff_max=0.01, max_concurrency=4)
    base.update(kw)
    return JudgeConfig(**base)


def items(*completions, prompt="Once upon a time, Lily found a"):
    return [{"model": "m", "sample": i, "prompt": prompt, "completion": c} for i, c in enumerate(completions)]


def cache_text(tmp_path) -> str:
    return "".join(p.read_text() for p in (tmp_path / "cache").rglob("*.json"))


# ----------------------------------------------------------------------------- parsing (no server)
@pytest.mark.parametrize("reply, expect", [
    (GOOD, (8, 6, 7, 5, "B")),
    ("**Grammar:** 9\n**Creativity:** 7.5\n**Consistency with the beginning:** 8\n**Plot sense:** 6\n**Age group:** C (6-7)",
     (9, 7.5, 8, 6, "C")),
    ('{"grammar": 4, "creativity": "3/10", "consistency": 2, "plot": 1, "age group": "A"}', (4, 3, 2, 1, "A")),
    ("Here you go: {\"Grammar\": 7, \"Creativity\": 7, \"Consistency\": 7, \"Plot_sense\": 7, \"Age\": \"D: 8-9\"}",
     (7, 7, 7, 7, "D")),
    ("Grades: [8, 7, 9, 6]. Age group: E", (8, 7, 9, 6, "E")),
    ("Grammar (1-10): 6 out of 10. Creativity (1-10): 5. Consistency: 4/10 and plot: 3/10. Age: 4-5", (6, 5, 4, 3, "B")),
    # an assessment mentioning the categories first: the last mention of each label wins
    ("The grammar has 2 small slips and the plot is thin.\nGrammar: 7\nCreativity: 5\nConsistency: 6\nPlot: 4\nAge group: B",
     (7, 5, 6, 4, "B")),
])
def test_parse_grades_formats(reply, expect):
    g = parse_grades(reply)
    assert (g["grammar"], g["creativity"], g["consistency"], g["plot"], g["age_group"]) == expect


@pytest.mark.parametrize("reply, problem", [
    ("Grammar: 11/10\nCreativity: 6\nConsistency: 7\nPlot: 5\nAge group: B", "grammar=11 out of range"),
    ("Grammar: 0\nCreativity: 6\nConsistency: 7\nPlot: 5\nAge group: B", "grammar=0 out of range"),
    ("Grammar: 8, Creativity: 6, Consistency: 7. Age group: B", "plot missing"),
    ("Grammar: 8, Creativity: 6, Consistency: 7, Plot: 5", "age group missing"),
    ("I cannot grade this.", "grammar missing"),
])
def test_parse_grades_rejects(reply, problem):
    with pytest.raises(GradeParseError, match=problem):
        parse_grades(reply)


# ----------------------------------------------------------------------------- config
def test_config_disabled_without_endpoint(monkeypatch):
    for v in ("STORYBENCH_JUDGE_BASE_URL", "STORYBENCH_JUDGE_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(v, raising=False)
    assert JudgeConfig.from_env() is None
    assert JudgeConfig.from_params({"judge": {"base_url": None, "model": None}}) is None
    assert JudgeConfig.from_params({"base_url": "http://x:1/v1", "model": "m", "enabled": False}) is None
    assert judge_status(None).startswith("skipped: no judge endpoint configured (set judge_base_url/judge_model params")
    with pytest.raises(ValueError, match="no judge endpoint"):
        grade_completions(None, items("a"))
    monkeypatch.setenv("STORYBENCH_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("STORYBENCH_JUDGE_MODEL", "llama")
    cfg = JudgeConfig.from_params({"judge": {"temperature": 0, "max_concurrency": 2}}, cache_dir="/tmp/x")
    assert cfg.model == "llama" and cfg.max_concurrency == 2 and cfg.endpoint == "http://127.0.0.1:9/v1/chat/completions"


def test_config_rejects_bad_input():
    with pytest.raises(ValueError, match="must not contain the judge API key"):
        JudgeConfig.from_params({"base_url": "http://x/v1", "model": "m", "api_key": "sk-123"})
    with pytest.raises(ValueError, match="http"):
        JudgeConfig(base_url="localhost:8000", model="m")
    with pytest.raises(ValueError, match="NAME of an environment variable"):
        JudgeConfig(base_url="http://x/v1", model="m", api_key_env="sk-abc-123 secret")
    with pytest.raises(ValueError, match="unknown judge parameter"):
        JudgeConfig.from_params({"base_url": "http://x/v1", "model": "m", "temprature": 1})


# ----------------------------------------------------------------------------- against the loopback server
def test_grades_and_cache_resume(server, key, tmp_path):
    cfg = make_cfg(server, tmp_path)
    its = items("she found a red ball.", "a cat sat.", "they played.", "a cat sat.")  # one duplicate
    df = grade_completions(cfg, its, progress=False)
    assert list(df["status"]) == ["graded"] * 4
    assert server.calls == 3 * 2  # two turns per unique item, the duplicate is graded once
    assert df[["grammar", "creativity", "consistency", "plot"]].iloc[0].tolist() == [8, 6, 7, 5]
    assert set(df["age_group"]) == {"B"} and list(df["sample"]) == [0, 1, 2, 3]  # extra columns carried
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 3
    # resume: nothing is paid twice
    df2 = grade_completions(cfg, its + items("a brand new one.", prompt="Other prompt"), progress=False)
    assert server.calls == 3 * 2 + 2
    assert list(df2["status"]) == ["cached"] * 4 + ["graded"]
    assert df2["grammar"].tolist()[:4] == df["grammar"].tolist()
    # the key includes the judge model and the prompt
    other = make_cfg(server, tmp_path, model="another-judge")
    grade_completions(other, its[:1], progress=False)
    assert server.calls == 3 * 2 + 2 + 2


def test_retries_on_429_500_and_garbled(server, key, tmp_path):
    sleeps: list[float] = []
    cfg = make_cfg(server, tmp_path, max_concurrency=1)
    client = JudgeClient(cfg, sleep=sleeps.append, jitter=0.0)
    df = grade_completions(cfg, items("x <<429>>", "y <<500x2>>", "z <<garbled>>", "w <<nochoices>>"),
                           progress=False, client=client)
    assert list(df["status"]) == ["graded"] * 4
    assert df["retries"].tolist() == [1, 2, 1, 1]
    assert df["grammar"].tolist() == [8] * 4
    assert 3.0 in sleeps  # Retry-After honoured
    assert 0.001 in sleeps and 0.002 in sleeps  # exponential backoff on the 500s
    assert server.calls == 2 * 4 + 1 + 2 + 1 + 1


def test_reask_on_out_of_range_missing_and_json(server, key, tmp_path):
    cfg = make_cfg(server, tmp_path)
    df = grade_completions(cfg, items("a <<range>>", "b <<missing>>", "c <<jsonreply>>"), progress=False, keep_text=True)
    assert list(df["status"]) == ["graded"] * 3
    assert df["retries"].tolist() == [1, 1, 0]  # a re-ask counts as a retry
    assert server.reasks == 2
    assert df.loc[0, "grammar"] == 8 and df.loc[1, "plot"] == 5
    assert df.loc[2, ["grammar", "creativity", "consistency", "plot", "age_group"]].tolist() == [9, 4, 3, 2, "C"]
    assert "grammatical" in df.loc[0, "assessment"]


def test_timeout_is_retried(server, key, tmp_path):
    cfg = make_cfg(server, tmp_path, timeout=0.4)
    df = grade_completions(cfg, items("slowpoke <<timeout>>"), progress=False)
    assert df.loc[0, "status"] == "graded" and df.loc[0, "retries"] == 1


def test_exhausted_retries_fail_uncached_and_key_scrubbed(server, key, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    cfg = make_cfg(server, tmp_path, max_retries=2)
    df = grade_completions(cfg, items("fine", "bad <<always500>>"), progress=False)
    assert df["status"].tolist() == ["graded", "failed"]
    assert df.loc[1, ["grammar", "plot"]].isna().all()
    assert "HTTP 500" in df.loc[1, "error"] and SECRET not in df.loc[1, "error"]
    assert server.auth[-1] == f"Bearer {SECRET}"  # the key was sent (and echoed back by the server)...
    assert SECRET not in caplog.text and SECRET not in cache_text(tmp_path)  # ...but never recorded
    calls = server.calls
    df2 = grade_completions(cfg, items("fine", "bad <<always500>>"), progress=False)
    assert df2["status"].tolist() == ["cached", "failed"] and server.calls == calls + 3  # failures are retried

def test_judge_themed_answers_grades_consistency_only_with_a_remote_judge(server, key, tmp_path):
    import pandas as pd

    from helpers.judge.local import LocalJudgeConfig
    from helpers.judge.runs import LOCAL_THEMED_NOTE, judge_themed_answers

    graded = pd.DataFrame({"model": ["a", "b"], "suite": ["factual"] * 2, "id": ["factual-1"] * 2,
                           "prompt": ["The sky is"] * 2, "answer": ["blue.", "bad <<always500>>"], "grade": ["success", "fail"]})
    for cfg, note in [(None, judge_status(None)), (LocalJudgeConfig(cache_dir=tmp_path), LOCAL_THEMED_NOTE)]:
        same, labels, why = judge_themed_answers(cfg, graded)
        assert same is graded and labels == {} and why == note
    judged, labels, why = judge_themed_answers(make_cfg(server, tmp_path, max_retries=1), graded)
    assert why is None and judged["judge consistency"].tolist()[0] == 7 and pd.isna(judged["judge consistency"].iloc[1])
    assert labels == {("a", "factual-1"): "judge consistency 7/10"}  # the failed item has no label
    assert "judge consistency" not in graded and judged.drop(columns="judge consistency").equals(graded)


def test_concurrency_cap(server, key, tmp_path):
    cfg = make_cfg(server, tmp_path, max_concurrency=3, two_turn=False)
    t0 = time.perf_counter()
    df = grade_completions(cfg, items(*[f"story {i} <<slow>>" for i in range(9)]), progress=False)
    assert (df["status"] == "graded").all()
    assert server.calls == 9  # single-turn mode: one request per item
    assert 2 <= server.max_inflight <= 3
    assert time.perf_counter() - t0 < 9 * 0.25  # it did run in parallel


def test_config_error_aborts(server, key, tmp_path):
    with pytest.raises(JudgeConfigError, match="HTTP 401"):
        grade_completions(make_cfg(server, tmp_path), items("x <<401>>"), progress=False)
    wrong = make_cfg(server, tmp_path, base_url=server.url.replace("/v1", "/v2"))
    with pytest.raises(JudgeConfigError, match="404"):
        grade_completions(wrong, items("y"), progress=False)


def test_key_never_leaks(server, key, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    cfg = make_cfg(server, tmp_path)
    client = JudgeClient(cfg)
    df = grade_completions(cfg, items("one", "two <<500x2>>"), progress=False, client=client, keep_text=True)
    assert server.auth and all(a == f"Bearer {SECRET}" for a in server.auth)
    texts = [repr(cfg), str(cfg), json.dumps(cfg.describe()), judge_status(cfg), repr(client), df.to_csv(),
             caplog.text, cache_text(tmp_path)]
    for t in texts:
        assert SECRET not in t
    assert cfg.describe()["api_key_set"] is True
    assert client.scrub(f"error: Authorization: Bearer {SECRET}") == "error: Authorization: Bearer ***"


def test_no_key_means_no_auth_header(server, tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    df = grade_completions(make_cfg(server, tmp_path), items("local server"), progress=False)
    assert df.loc[0, "status"] == "graded" and server.auth == [None, None]


def test_grade_prompt_follows_the_paper():
    assert "Now, grade the student's completion in terms of grammar, creativity, consistency" in GRADE_TEMPLATE
    for g in "ABCDEF":
        assert f"{g}:" in GRADE_TEMPLATE


# ----------------------------------------------------------------------------- the instruct protocol
def test_parse_instruct_grades():
    reply = "Grammar: 7\nCreativity: 5\nConsistency: 6\nPlot: 4\nInstructions: 3/10\nAge group: B"
    g = parse_grades(reply, categories=INSTRUCT_CATEGORIES)
    assert (g["instructions"], g["plot"], g["age_group"]) == (3, 4, "B")
    assert "instructions" not in parse_grades(reply)  # the story protocol ignores it
    assert parse_grades('{"grammar": 8, "creativity": 7, "consistency": 6, "plot": 5, "instruction following": 2, '
                        '"age": "C"}', categories=INSTRUCT_CATEGORIES)["instructions"] == 2
    assert parse_grades("[8, 7, 6, 5, 9] Age group: A", categories=INSTRUCT_CATEGORIES)["instructions"] == 9
    with pytest.raises(GradeParseError, match="instructions missing"):
        parse_grades(GOOD, categories=INSTRUCT_CATEGORIES)
    assert "Instructions: <1-10>" in INSTRUCT_GRADE_TEMPLATE and INSTRUCT_GRADE_TEMPLATE.startswith("Now, grade")


def test_instruct_protocol_against_server(server, key, tmp_path):
    cfg = make_cfg(server, tmp_path)
    prompt = "Words: meet, waffle, new\nFeatures: Dialogue"
    its = [{"model": "m", "prompt": prompt, "completion": "Lily met a new friend. <<noinstr>>"},
           {"model": "m", "prompt": prompt, "completion": "Tom ate a waffle."}]
    df = grade_completions(cfg, its, progress=False, kind="instruct", keep_text=True)
    assert df["status"].tolist() == ["graded", "graded"]
    assert df["instructions"].tolist() == [4, 4] and df["retries"].tolist() == [1, 0]  # a missing grade is re-asked
    assert server.reasks == 1
    # the same text under the story protocol is another cache entry, without the instructions grade
    calls = server.calls
    story = grade_completions(cfg, its[1:], progress=False)
    assert story.loc[0, "status"] == "graded" and "instructions" not in story.columns and server.calls == calls + 2
    again = grade_completions(cfg, its, progress=False, kind="instruct")
    assert again["status"].tolist() == ["cached", "cached"] and server.calls == calls + 2
    with pytest.raises(ValueError, match="unknown judge protocol"):
        grade_completions(cfg, its, progress=False, kind="poem")


# ----------------------------------------------------------------------------- judge validity: length-matched pairs, the gate
import random as _random

import pandas as _pd

from helpers.judge import validity as JV


def _fake_judge(items, signals, seed=0):
    """Grade ``items`` (validity rows) as a judge whose grade of each criterion follows ``signals[criterion]``:
    ``"real"`` (knows the real ending: 7 for it, 3 for anything else), ``"coherent"`` (7 for any ending whose
    sentences keep a story's order, the real and the other story's; 3 for the rest), ``"length"`` (the word count)
    or ``"random"`` (seeded noise, blind to the ending)."""
    rng = _random.Random(seed)
    real = {r["pair"]: r["completion"] for r in items if r["variant"] == "real"}
    rows = []
    for r in items:
        is_real = r["completion"] == real[r["pair"]]
        row = {**r, "status": "graded", "age_group": "B", "age_expected": 2.0}
        for c, sig in signals.items():
            row[c] = {"real": 7.0 if is_real else 3.0,
                      "coherent": 7.0 if r["variant"] in ("real", "other story") else 3.0,
                      "length": float(JV.n_words(r["completion"])),
                      "random": float(rng.randint(1, 10))}[sig]
        rows.append(row)
    return _pd.DataFrame(rows)


def test_gate_known_answer(real_stories):
    """A judge that tells real endings from corrupted ones passes the gate; one that grades at random, one that
    catches only the shuffled endings, and one that grades length fail it, each with its reason."""
    items = JV.validity_items(real_stories, 24, seed=3)
    graded = _fake_judge(items, {"grammar": "length", "creativity": "real", "consistency": "random", "plot": "coherent"})
    table = JV.validity_table(graded)
    gate = JV.judge_gate(table).set_index("criterion")
    assert JV.passing_criteria(gate.reset_index()) == ["creativity"]
    assert gate.at["creativity", "reason"].startswith("passes: lower bounds above 50 % on shuffled 100 %")
    assert "other story" in gate.at["plot", "reason"] and "on other story (" in gate.at["plot", "reason"]  # shuffled caught
    assert not gate.at["consistency", "passes"] and gate.at["consistency", "reason"].startswith("fails:")
    # equal lengths make a length-grading judge tie on every corruption: exactly chance, never a pass
    t = table.set_index(["criterion", "corruption"])
    for kind in JV.CORRUPTIONS:
        assert t.at[("grammar", kind), "real wins"] == 0.5
    assert "shuffled and other story" in gate.at["grammar", "reason"]
    text = JV.gate_verdict(gate.reset_index(), "fake")
    assert "graded with creativity only" in text or "graded with this criterion only" in text
    # no criterion passes: the verdict says GPT-Eval cannot be measured, and ranks nothing
    blind = JV.judge_gate(JV.validity_table(_fake_judge(items, {c: "random" for c in JV.GRADED_CRITERIA}, seed=1)))
    assert JV.passing_criteria(blind) == []
    assert "cannot be measured offline with this judge" in JV.gate_verdict(blind, "fake")
    # the age guess is gated too but never grades with the others
    assert JV.passing_criteria(JV.judge_gate(table), ("age",)) == []


def test_gate_needs_both_required_corruptions():
    table = _pd.DataFrame([{"criterion": "plot", "corruption": "shuffled", "real wins": 0.9, "low": 0.7, "high": 0.97},
                           {"criterion": "plot", "corruption": "scrambled", "real wins": 1.0, "low": 0.86, "high": 1.0}])
    gate = JV.judge_gate(table, criteria=["plot"])
    assert not gate.at[0, "passes"] and "other story: no graded pairs" in gate.at[0, "reason"]
    table.loc[len(table)] = {"criterion": "plot", "corruption": "other story", "real wins": 0.62, "low": 0.43, "high": 0.79}
    gate = JV.judge_gate(table, criteria=["plot"])
    assert not gate.at[0, "passes"]
    assert gate.at[0, "reason"] == ("fails: lower bound at or below 50 % on other story (shuffled 90 % [70, 97]; "
                                    "other story 62 % [43, 79])")
    table.loc[table.corruption == "other story", "low"] = 0.51
    assert JV.passing_criteria(JV.judge_gate(table, criteria=["plot"]), ["plot"]) == ["plot"]


def test_corruptions_have_the_real_endings_length(real_stories):
    items = JV.validity_items(real_stories, 24, seed=5)
    df = _pd.DataFrame(items)
    df["words"] = df["completion"].map(JV.n_words)
    words = df.pivot(index="pair", columns="variant", values="words")
    assert set(words.columns) == {"real", *JV.CORRUPTIONS}
    for kind in JV.CORRUPTIONS:
        assert (words[kind] == words["real"]).all(), kind
    # the other story's piece is a real ending of another story (its last whole sentences), never this story's
    norm = [" ".join(s.split()) for s in real_stories]
    other = df[df.variant == "other story"].set_index("pair")["completion"]
    real = df[df.variant == "real"].set_index("pair")["completion"]
    assert all(o != real[p] and any(s.endswith(o) for s in norm) for p, o in other.items())


def test_length_matched_and_loop():
    sources = ["Start here now. One two three. Four five. Six seven eight nine.", "Aa bb cc dd ee ff gg hh ii jj."]
    assert JV.length_matched(6, sources) == "Four five. Six seven eight nine."  # the last whole sentences
    assert JV.length_matched(5, sources) == "One two three. Four five."  # a run of whole sentences
    assert JV.length_matched(7, sources) == "three. Four five. Six seven eight nine."  # else the first source's last words
    for n in range(1, 13):
        assert JV.n_words(JV.length_matched(n, sources)) == n
        assert n == 12 or not JV.length_matched(n, sources).startswith("Start")  # a first sentence ends no story
    assert JV.length_matched(2, sources, exclude=sources[0]) == "ii jj."
    with pytest.raises(ValueError):
        JV.length_matched(13, sources)
    end = "Tom ran to the park. He saw a big dog. The dog was kind. They played all day and went home."
    loop = JV.loop_ending(end)
    assert JV.n_words(loop) == JV.n_words(end) and loop != end
    assert loop.startswith("Tom ran to the park. He saw a big dog. He saw a big dog. He saw")
    assert JV.corrupt(end, "looping", _random.Random(0)) == loop
    with pytest.raises(ValueError):
        JV.loop_ending("Only one sentence here.")


def test_decoder_items_pair_real_and_decoder_endings_of_equal_length():
    stories = {i: f"Story {i} starts here. " + " ".join(f"w{i}x{j}." for j in range(40)) for i in range(10)}
    conts = []
    for m, n_dec in (("a", 12), ("b", 60)):
        for i in range(10):
            prompt = f"Story {i} starts here."
            conts.append({"model": m, "story_id": i, "prompt": prompt, "completion": " ".join(["la"] * n_dec)})
    conts.append({"model": "a", "story_id": 99, "prompt": "Not a story.", "completion": "x " * 30})  # no such story
    items = JV.decoder_items(conts, stories, 6, seed=0, first_pair=100)
    df = _pd.DataFrame(items)
    assert len(df) == 12 and sorted(df.pair.unique()) == list(range(100, 106))
    assert set(df.variant) == {"real", JV.DECODER_KIND} and df.groupby("model").pair.nunique().to_dict() == {"a": 3, "b": 3}
    for _, g in df.groupby("pair"):
        w = g.set_index("variant")["completion"].map(JV.n_words)
        assert w["real"] == w[JV.DECODER_KIND] == (12 if g.model.iat[0] == "a" else 40)
        sid = int(g["prompt"].iat[0].split()[1])
        assert stories[sid].split()[4:4 + w["real"]] == g.set_index("variant").at["real", "completion"].split()
    assert df.groupby("pair")["prompt"].first().nunique() == 6  # one pair per story
    # in the validity table the decoder pairs are their own row, never pooled with the corruptions
    graded = _fake_judge(_toy_items() + items, {"plot": "real"})
    t = JV.validity_table(graded, criteria=["plot"]).set_index("corruption")
    assert t.at[JV.DECODER_KIND, "pairs"] == 6 and t.at["all", "pairs"] == 4 * 3


def _toy_items():
    rows = []
    for p in range(3):
        rows.append({"pair": p, "variant": "real", "prompt": f"b{p}", "completion": f"real {p}"})
        rows += [{"pair": p, "variant": k, "prompt": f"b{p}", "completion": f"{k} {p}"} for k in JV.CORRUPTIONS]
    return rows


def test_decoder_continuations_reads_notebook_03_files(tmp_path):
    from helpers.core.artifacts import write_jsonl
    from helpers.judge.runs import decoder_continuations

    write_jsonl(tmp_path / "continuations-held-out-m1.jsonl", [{"story_id": 1, "prompt": "p", "completion": "c"}])
    rows, missing = decoder_continuations(tmp_path, ["m1", "m2"])
    assert rows == [{"story_id": 1, "prompt": "p", "completion": "c", "model": "m1"}] and missing == ["m2"]


def test_length_correlation():
    df = _pd.DataFrame({"completion": ["a", "a b", "a b c", "a b c d"], "status": "graded", "age_group": "B",
                        "grammar": [1.0, 2, 3, 4], "plot": [4.0, 3, 2, 1], "creativity": 5.0, "consistency": [1.0, 2, 3, 4]})
    r = JV.length_correlation(df, ["grammar", "plot", "creativity"]).set_index("criterion")["r with length"]
    assert r["grammar"] == 1.0 and r["plot"] == -1.0 and _pd.isna(r["creativity"])


def test_gate_verdict_names_only_the_required_kinds(real_stories):
    items = JV.validity_items(real_stories, 6, seed=2)
    graded = _fake_judge(items, {c: "random" for c in JV.GRADED_CRITERIA})
    gate = JV.judge_gate(JV.validity_table(graded)).merge(JV.length_correlation(graded), on="criterion")
    text = JV.gate_verdict(gate, "fake")
    assert "on both shuffled and other story endings, so GPT-Eval" in text and "r with length" not in text
    note = JV.closing_note(JV.validity_table(graded), "fake", None, [], gate=gate)
    assert "none passes the gate on shuffled and other story)" in note


# ----------------------------------------------------------------------------- bounded requests
class RawServer:
    """A one-thread TCP server on 127.0.0.1 that answers each connection with ``reply(conn)`` (raw bytes, paced as
    the test wants); it stops when the test closes it or the client goes away."""

    def __init__(self, reply):
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.stop = threading.Event()
        self.connections = 0
        self.reply = reply
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        import socket

        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.connections += 1
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(65536)  # the request (small)
                    self.reply(conn, self.stop)
                except OSError:
                    pass  # the client hung up: what a bounded client does

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


def _drip(data: bytes, every: float = 0.5):
    def reply(conn, stop):
        for i in range(len(data)):
            if stop.is_set():
                return
            conn.sendall(data[i:i + 1])
            time.sleep(every)
    return reply


OK_BODY = json.dumps({"choices": [{"message": {"content": "Grammar: 8/10"}}]}).encode()


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_server_dripping_one_byte_every_half_second_is_cut_off_at_the_total_deadline(where):
    """A per-read timeout never fires on a server that sends a byte every 0.5 s; the request's total deadline does."""
    from helpers.judge.rubric import JudgeUnreachable

    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(OK_BODY)}\r\n\r\n".encode()
    if where == "headers":
        reply = _drip(head + OK_BODY)
    else:
        def reply(conn, stop):
            conn.sendall(head)
            _drip(OK_BODY)(conn, stop)
    server = RawServer(reply)
    try:
        cfg = JudgeConfig(base_url=server.url, model="m", api_key_env="NO_SUCH_KEY_ENV", timeout=1.5, max_retries=0,
                          max_connection_failures=1)
        client = JudgeClient(cfg)
        t0 = time.monotonic()
        with pytest.raises(JudgeUnreachable, match=r"no whole reply within the deadline of 1\.5s"):
            client.chat([{"role": "user", "content": "hi"}])
        elapsed = time.monotonic() - t0
        assert 1.4 <= elapsed < 3.0, elapsed  # the deadline, not the ~40 s the drip would take
    finally:
        server.close()


def test_the_deadline_allows_a_prompt_reply():
    def reply(conn, stop):
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(OK_BODY)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + OK_BODY)
    server = RawServer(reply)
    try:
        cfg = JudgeConfig(base_url=server.url, model="m", api_key_env="NO_SUCH_KEY_ENV", timeout=2, max_retries=0)
        assert JudgeClient(cfg).chat([{"role": "user", "content": "hi"}]) == "Grammar: 8/10"
    finally:
        server.close()


@pytest.mark.parametrize("announced", [True, False])
def test_a_reply_over_the_size_cap_is_refused_without_reading_it_all(announced):
    from helpers.judge.rubric import JudgeError

    big = b"x" * 200_000

    def reply(conn, stop):
        head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {len(big)}\r\n" if announced else "Connection: close\r\n"
        conn.sendall(head.encode() + b"\r\n" + big)

    server = RawServer(reply)
    try:
        cfg = JudgeConfig(base_url=server.url, model="m", api_key_env="NO_SUCH_KEY_ENV", timeout=5, max_retries=3,
                          max_reply_bytes=1000)
        client = JudgeClient(cfg, sleep=lambda s: None)
        t0 = time.monotonic()
        with pytest.raises(JudgeError, match=r"judge reply refused: .*over the cap of 1,000 bytes "
                                             r"\(judge_max_reply_bytes in the params of notebook 05b\)"):
            client.chat([{"role": "user", "content": "hi"}])
        assert time.monotonic() - t0 < 5 and client.requests == 1  # refused at once, not retried
    finally:
        server.close()


def test_a_retry_after_of_an_hour_is_capped():
    def reply_429_then_ok():
        calls = []

        def reply(conn, stop):
            calls.append(1)
            if len(calls) == 1:
                conn.sendall(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3600\r\nContent-Length: 4\r\n"
                             b"Connection: close\r\n\r\nslow")
            else:
                conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(OK_BODY)}\r\nConnection: close\r\n\r\n".encode()
                             + OK_BODY)
        return reply

    for kw, cap in (({}, 30.0), ({"retry_after_max": 2.5}, 2.5)):
        raw = RawServer(reply_429_then_ok())
        try:
            slept: list[float] = []
            cfg = JudgeConfig(base_url=raw.url, model="m", api_key_env="NO_SUCH_KEY_ENV", timeout=5, max_retries=2, **kw)
            t0 = time.monotonic()
            assert JudgeClient(cfg, sleep=slept.append).chat([{"role": "user", "content": "hi"}]) == "Grammar: 8/10"
            assert slept == [cap] and time.monotonic() - t0 < 5
        finally:
            raw.close()


def test_the_bounds_are_params_of_notebook_05b_with_safe_defaults():
    from helpers import runner
    from helpers.core import config
    from helpers.judge.runs import judge_config

    declared = runner.declared_parameters(config.repo_root() / "notebooks" / "05b_story_evaluation.ipynb")
    assert declared["judge_retry_after_max"]["default"] == "30.0" and declared["judge_max_reply_bytes"]["default"] == "1000000"
    for profile in config.PROFILES:
        p = config.load_params(profile, "05b")
        assert 0 < p["judge_timeout"] <= 300 and 0 <= p["judge_retry_after_max"] <= 300
        assert 1 <= p["judge_max_reply_bytes"] <= 10_000_000
    cfg = judge_config("http://127.0.0.1:1/v1", "m", "NO_SUCH_KEY_ENV", timeout=7.0, retry_after_max=4.0,
                       max_reply_bytes=5000)
    assert (cfg.timeout, cfg.retry_after_max, cfg.max_reply_bytes) == (7.0, 4.0, 5000)
    with pytest.raises(config.ParamsError, match="judge_max_reply_bytes = 0 is out of range"):
        config.check_params({"judge_max_reply_bytes": 0})
    with pytest.raises(ValueError, match="retry_after_max must be >= 0"):
        JudgeConfig(base_url="http://127.0.0.1:1/v1", model="m", retry_after_max=-1)
