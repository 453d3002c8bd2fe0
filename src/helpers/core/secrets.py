"""Secrets never reach an output: params that must name an environment variable but hold the key itself
(:func:`secret_name_problem`), URLs that carry a credential (:func:`url_credential_problem`; both refused by the params
checks of :mod:`helpers.core.config` before any notebook runs), the secrets a run may handle (:func:`secret_values`,
masked by :func:`mask_secrets` in the executed notebooks and the runner's error lines), and :func:`redact` /
:func:`redact_params`, which mask whatever looks like a credential in text and params (the manifest, logs, error
messages). Standard library only (imported by the runner and the params checks)."""
from __future__ import annotations

import os
import re
import urllib.parse
from typing import Any

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# prefixes of common API keys and tokens (OpenAI, Anthropic, GitHub, Hugging Face, Slack, AWS, Google, GitLab, ...)
_KEY_PREFIX = re.compile(r"^(sk|pk|rk)[-_]|^sk-ant-|^gh[pousr]_|^github_pat_|^hf_|^xox[abprs]-|^AKIA|^ASIA|^AIza|^glpat-|"
                         r"^ya29\.|^eyJ")


def looks_like_secret(value: Any) -> bool:
    """Whether ``value`` looks like an API key or token rather than the *name* of an environment variable: a known
    key prefix, characters no variable name has (``-``, ``.``, ``/``, ``=``...), or a long run mixing lower- and
    upper-case letters and digits (variable names are written in one case, such as ``OPENAI_API_KEY``)."""
    if not isinstance(value, str):
        return False
    s = value.strip()
    if len(s) < 12:
        return False
    if _KEY_PREFIX.search(s) or not _ENV_NAME.fullmatch(s):
        return True
    digits, lower, upper = (any(f(c) for c in s) for f in (str.isdigit, str.islower, str.isupper))
    return (digits and lower and upper) or (len(s) >= 32 and digits and "_" not in s)


# params whose value is the NAME of an environment variable that holds a secret (the key itself must never be there)
SECRET_NAME_KEYS = ("judge_api_key_env", "api_key_env")


def secret_name_problem(key: str, value: Any, where: str = "") -> str | None:
    """The problem of a params value that must name an environment variable (:data:`SECRET_NAME_KEYS`) but holds
    what looks like the secret itself; the value is never repeated, only its length."""
    if key not in SECRET_NAME_KEYS or not isinstance(value, str):
        return None
    if looks_like_secret(value) or not _ENV_NAME.fullmatch(value):
        return (f"{where}{key} holds what looks like an API key ({len(value)} characters, not shown), not the NAME of "
                f"an environment variable; put the variable's name there (e.g. OPENAI_API_KEY), export the key in "
                f"that variable, and remove the key from the file (and from git history if it was committed)")
    return None


# query parameters of a URL that carry a credential (``?api_key=...``), and the ends of such names (``x_api_key``)
CREDENTIAL_QUERY_KEYS = ("api_key", "apikey", "api-key", "key", "token", "access_token", "auth_token", "auth", "secret",
                         "client_secret", "password", "passwd", "pwd", "sig", "signature")
_CREDENTIAL_QUERY = re.compile(r"(?i)^(?:" + "|".join(map(re.escape, CREDENTIAL_QUERY_KEYS)) +
                               r"|[a-z0-9_.-]*[_.-](?:key|token|secret|password))$")
_URL = re.compile(r"(?i)^[a-z][a-z0-9+.-]*://")


def url_credentials(value: Any) -> list[tuple[str, str]]:
    """``(where, secret)`` of every credential a URL carries: its userinfo (``user:pass@``: the password, or a user
    name that looks like a key) and the values of credential query parameters (:data:`CREDENTIAL_QUERY_KEYS`:
    ``api_key=``, ``key=``, ``token=``, ``access_token=``, ``secret=``, ``password=``...); empty for anything else."""
    if not isinstance(value, str) or not _URL.match(value.strip()):
        return []
    try:
        u = urllib.parse.urlsplit(value.strip())
        user, password = u.username, u.password
    except ValueError:
        return [("an unreadable URL", value)]
    found = []
    if password:
        found.append(("user:password@ in the URL", password))
    if user and (password or looks_like_secret(user)):
        found.append(("a user name that looks like a key in the URL", user))
    for name, v in urllib.parse.parse_qsl(u.query, keep_blank_values=True):
        if _CREDENTIAL_QUERY.match(name) and v:
            found.append((f"its query parameter {name}=", v))
    return found


def url_credential_problem(key: str, value: Any, where: str = "") -> str | None:
    """The problem of a params value that is a URL carrying a credential (:func:`url_credentials`), naming what
    carries it but never the credential, and pointing to the ``*_api_key_env`` environment variable instead."""
    found = url_credentials(value)
    if not found:
        return None
    what = ", ".join(dict.fromkeys(w for w, _ in found))
    return (f"{where}{key} carries a credential in its URL ({what}; not shown): give the URL without it and put the key "
            f"in the environment variable named by judge_api_key_env (e.g. export OPENAI_API_KEY=...), then remove the "
            f"key from the file (and from git history if it was committed)")


_KEY_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_-])(?:sk-ant-[A-Za-z0-9_-]{8,}|(?:sk|pk|rk)[-_][A-Za-z0-9_-]{12,}|"
                          r"gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|hf_[A-Za-z0-9]{16,}|"
                          r"xox[abprs]-[A-Za-z0-9-]{10,}|A[KS]IA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|glpat-[A-Za-z0-9_-]{16,}|"
                          r"ya29\.[A-Za-z0-9_.-]{16,}|eyJ[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_.-]+)")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#\"'<>]+@")
_QUERY_SECRET = re.compile(r"(?i)([?&;](?:" + "|".join(map(re.escape, CREDENTIAL_QUERY_KEYS)) +
                           r"|[a-z0-9_.-]*[_.-](?:key|token|secret|password))=)[^&#;\s\"'<>]+")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+")
_KEYISH_NAME = re.compile(r"(?i)(key|token|secret|password|passwd|credential|auth)")


def redact(text: Any) -> Any:
    """``text`` with what looks like a credential replaced by ``***``: a URL's userinfo (``https://***@host``), the
    value of a credential query parameter (``?api_key=***``), a bearer token, and tokens with a known key prefix
    (``sk-...``, ``ghp_...``, ``hf_...``, ``AKIA...``). Anything but a string is returned as it is. For the
    manifest, logs and error messages; :func:`redact_params` for a whole params mapping."""
    if not isinstance(text, str):
        return text
    text = _USERINFO.sub(r"\1***@", text)
    text = _QUERY_SECRET.sub(r"\1***", text)
    text = _BEARER.sub(r"\1***", text)
    return _KEY_IN_TEXT.sub("***", text)


def redact_params(params: Any, key: str = "") -> Any:
    """A copy of ``params`` (mappings and lists, at any depth) with every string :func:`redact`-ed, and the whole
    value of a key-ish field (its name says key, token, secret, password...) replaced by ``***`` where it looks like
    a key (:func:`looks_like_secret`); the names of environment variables (``judge_api_key_env: OPENAI_API_KEY``)
    are kept."""
    if isinstance(params, dict):
        return {k: redact_params(v, str(k)) for k, v in params.items()}
    if isinstance(params, (list, tuple)):
        return type(params)(redact_params(v, key) for v in params)
    if not isinstance(params, str):
        return params
    if key in SECRET_NAME_KEYS and (looks_like_secret(params) or not _ENV_NAME.fullmatch(params)):
        return "***"
    if key not in SECRET_NAME_KEYS and _KEYISH_NAME.search(key) and looks_like_secret(params):
        return "***"
    return redact(params)


def secret_values(params: Any) -> list[str]:
    """The secrets a run with ``params`` may handle, to be masked wherever output is written (the executed
    notebooks, error lines): the value of every environment variable named by a :data:`SECRET_NAME_KEYS` entry (at
    any depth; ``OPENAI_API_KEY`` and ``$STORYBENCH_JUDGE_API_KEY_ENV``'s variable by default), any such
    entry's value that is itself a key, the credentials of any URL among the values (:func:`url_credentials`) and
    the value of a key-ish field that looks like a key (:func:`redact_params`). Values shorter than 8 characters are left out (masking them would garble
    ordinary text)."""
    names = {"OPENAI_API_KEY", os.environ.get("STORYBENCH_JUDGE_API_KEY_ENV") or "OPENAI_API_KEY"}
    found: set[str] = set()

    def walk(obj: Any, key: str = "") -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                if k in SECRET_NAME_KEYS and isinstance(v, str):
                    (found if looks_like_secret(v) or not _ENV_NAME.fullmatch(v) else names).add(v)
                else:
                    walk(v, str(k))
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v, key)
        elif isinstance(obj, str):
            found.update(v for _, v in url_credentials(obj))  # refused by the params checks; masked all the same
            if redact_params(obj, key) == "***":
                found.add(obj)

    walk(params)
    found |= {os.environ[n] for n in names if os.environ.get(n)}
    return sorted((v for v in found if len(v.strip()) >= 8), key=len, reverse=True)


def mask_secrets(text: str, secrets: list[str] | tuple[str, ...]) -> str:
    """``text`` with every one of ``secrets`` replaced by ``***``."""
    for v in secrets:
        if v and v in text:
            text = text.replace(v, "***")
    return text
