"""``doctor --model M --endpoint URL``: does the hidden-states server fit the training run?

Why: upstream meets a served-name mismatch or other extracted layers only per sample
(docs/upstream.md, "Training: dropped samples", "Layer ids"). The name is compared and one probe
request's stored file is checked for ``len(target ids) + 1`` layers; standard library HTTP.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from speculators_qwen_compat.core.errors import CompatError, reason_of

PROBE_TOKENS = 8


@dataclass
class EndpointCheck:
    served: str
    asked: str
    stored_layers: int | None = None
    stored_hidden: int | None = None
    expected_layers: int = 0
    expected_hidden: int | None = None
    target_ids: list[int] = field(default_factory=list)
    last_layer: int = 0
    probe_error: str | None = None

    @property
    def name_ok(self) -> bool:
        return self.served == self.asked

    @property
    def layers_ok(self) -> bool:
        return self.stored_layers == self.expected_layers and (
            self.expected_hidden is None or self.stored_hidden == self.expected_hidden
        )


def api_base(endpoint: str) -> str:
    base = endpoint.rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


class HttpRefused(CompatError):
    """The server answered with an HTTP error status (``status``): it is up, and said no."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def fetch(url: str, body: dict[str, Any] | None = None, timeout: float = 120) -> bytes:
    """GET ``url`` (POST ``body`` as JSON); the reply's bytes. HttpRefused for an error status,
    CompatError ("no answer") when nothing answers: doctor's and acceptance's one HTTP client."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data else {}
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.read()
    except urllib.error.HTTPError as exc:
        detail = " ".join(exc.read().decode(errors="replace").split())[:300]
        raise HttpRefused(f"--endpoint {url}: HTTP {exc.code}: {detail}", exc.code) from None
    except (OSError, ValueError) as exc:
        raise CompatError(f"--endpoint {url}: no answer ({reason_of(exc)})") from None


def request_json(url: str, body: dict[str, Any] | None = None, timeout: float = 120) -> Any:
    """``fetch`` with the reply read as JSON (a reply that is not JSON: "no answer")."""
    reply = fetch(url, body, timeout)
    try:
        return json.loads(reply)
    except ValueError as exc:
        raise CompatError(f"--endpoint {url}: no answer ({reason_of(exc)})") from None


def verifier_shape(model: str) -> tuple[int, int] | None:
    """(num_hidden_layers, hidden_size) from the model folder's config.json (text_config
    first, as upstream reads a multimodal verifier), or None when it is not a local folder
    or its config does not say (a processor-only folder)."""
    path = Path(model).expanduser() / "config.json"
    if not path.is_file():
        return None
    config = json.loads(path.read_text(encoding="utf-8"))
    config = config.get("text_config") or config
    if "num_hidden_layers" not in config or "hidden_size" not in config:
        return None
    return int(config["num_hidden_layers"]), int(config["hidden_size"])


def default_layer_ids(layers: int) -> list[int]:
    """The verifier layers training extracts when ``--target-layer-ids`` is not given (upstream's
    default, docs/upstream.md "Layer ids"); vLLM's list adds the last layer, ``layers``."""
    return [2, layers // 2, layers - 3]


def check_endpoint(
    endpoint: str, model: str, target_ids: list[int] | None, probe_ids: list[int]
) -> EndpointCheck:
    base = api_base(endpoint)
    models = request_json(base + "/models", timeout=30).get("data") or []
    if not models:
        raise CompatError(f"--endpoint {base}: the server lists no model yet (still loading?)")
    served = str(models[0]["id"])
    shape = verifier_shape(model)
    if target_ids is None:
        if shape is None:
            raise CompatError(
                f"--model {model} has no local config.json that says num_hidden_layers: "
                "pass --target-layer-ids as training will"
            )
        layers = shape[0]
        target_ids = default_layer_ids(layers)
    check = EndpointCheck(
        served=served,
        asked=model,
        expected_layers=len(target_ids) + 1,
        expected_hidden=shape[1] if shape else None,
        target_ids=list(target_ids),
        last_layer=shape[0] if shape else 0,
    )
    try:
        stored = _probe(base, served, probe_ids)
    except CompatError as exc:
        check.probe_error = str(exc)
        return check
    check.stored_layers, check.stored_hidden = stored
    return check


def _probe(base: str, served: str, probe_ids: list[int]) -> tuple[int, int]:
    """Ask the server to extract the hidden states of a few tokens; (layers, hidden size)."""
    reply = request_json(
        base + "/completions",
        {"model": served, "prompt": probe_ids, "max_tokens": 1, "temperature": 0},
    )
    params = reply.get("kv_transfer_params") or {}
    path = params.get("hidden_states_path")
    if not path:
        raise CompatError(
            "the server returned no hidden_states_path: it does not extract hidden states "
            "(serve with --speculative-config method extract_hidden_states and a kv connector)"
        )
    try:
        _wait_for(path)
        from safetensors import safe_open

        with safe_open(path, framework="numpy") as stored:
            shape = stored.get_slice("hidden_states").get_shape()
    finally:
        for leftover in (path, path + ".lock"):
            if os.path.exists(leftover):
                os.remove(leftover)
    if len(shape) != 3:
        raise CompatError(f"the probe's hidden_states have shape {shape}, not [tokens, layers, h]")
    return int(shape[1]), int(shape[2])


def _wait_for(path: str, timeout: float = 30) -> None:
    """The server answers before its file is whole: wait on its lock file, as upstream's
    client does (vllm_client.wait_for_lock), then for the file to appear."""
    lock = path + ".lock"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(lock):
            with open(lock) as handle:
                fcntl.flock(handle, fcntl.LOCK_SH)  # held by the server until the file is whole
        if os.path.exists(path):
            return
        time.sleep(0.1)
    raise CompatError(
        f"the server stored its probe at {path}, which is not visible here: run this check "
        "(and training) where the server's shared_storage_path is mounted"
    )


def print_check(check: EndpointCheck, endpoint: str, out: TextIO) -> None:
    print(f"server: {api_base(endpoint)}", file=out)
    if check.name_ok:
        print(f'  served model: matches ("{check.served}")', file=out)
    else:
        print(
            f'  served model: MISMATCH: the server serves "{check.served}", training will name '
            f'"{check.asked}"; every sample would be dropped. Restart vLLM with '
            f'--served-model-name "{check.asked}" (or name "{check.served}" in training)',
            file=out,
        )
    ids = ", ".join(map(str, check.target_ids))
    last = f" and the last ({check.last_layer})" if check.last_layer else " and the last"
    wanted = f"training asks for layers [{ids}]{last}: {check.expected_layers} layers"
    if check.expected_hidden is not None:
        wanted += f" of size {check.expected_hidden}"
    print(f"  {wanted}", file=out)
    if check.probe_error:
        print(f"  layers: UNKNOWN: the probe failed: {check.probe_error}", file=out)
        return
    stored = f"the server extracts {check.stored_layers} layers of size {check.stored_hidden}"
    if check.layers_ok:
        print(f"  layers: match: {stored}", file=out)
    else:
        print(
            f"  layers: MISMATCH: {stored}; restart vLLM with eagle_aux_hidden_state_layer_ids "
            f"[{ids}, {check.last_layer or 'N'}] or pass training the --target-layer-ids the "
            "server was started for",
            file=out,
        )


def verdict(check: EndpointCheck) -> str | None:
    """The one-line error for a server that does not fit, or None."""
    problems = []
    if not check.name_ok:
        problems.append(f'it serves "{check.served}", training names "{check.asked}"')
    if check.probe_error:
        problems.append("its extracted layers could not be checked")
    elif not check.layers_ok:
        problems.append(
            f"it extracts {check.stored_layers} layers, training expects {check.expected_layers}"
        )
    if not problems:
        return None
    return "the hidden-states server does not fit this training run: " + "; ".join(problems)
