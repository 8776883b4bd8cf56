"""faid's REST API (`http.endpoint`, routes under /api/v1, docs/control.md), with urllib.

    from faid import Rest
    api = Rest("http://127.0.0.1:8080", token_file="/etc/faid/tokens")
    print(api.status()["state"])
    api.set_writer(directory="/data/scan42", prefix="scan42")

Read-only routes need no token on localhost; every route that changes state sends
`Authorization: Bearer TOKEN`. An error answer (RFC 9457 problem+json) raises FaidError with the
problem's `title`/`detail`, its `type` as `code`, the faulty `key` and the HTTP `status`."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Union

from .control import FaidError


def read_token(path: str) -> str:
    """The first token of a token file (`http.token_file` layout: one token a line, optionally
    `name:token`; blank lines and `#` comments skipped)."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                return line.split(":", 1)[1].strip() if ":" in line else line
    raise ValueError("%s: no token" % path)


class RestError(FaidError):
    """An HTTP error answer: `status` the HTTP status, `problem` the problem+json map."""

    def __init__(self, status: int, problem: Dict[str, Any]):
        msg = "HTTP %d %s: %s" % (status, problem.get("title", ""), problem.get("detail", ""))
        super().__init__(msg, str(problem.get("type", "")), problem.get("key"), problem)
        self.status, self.problem = status, problem


class Rest:
    """Client of the REST routes. base_url: `http://HOST:PORT` or `https://...`; token (or
    token_file): the bearer token for state-changing routes; verify: check the server's TLS
    certificate (True), not (False), or against this CA file (str); timeout in seconds."""

    def __init__(self, base_url: str = "http://127.0.0.1:8080", token: Optional[str] = None,
                 token_file: Optional[str] = None, verify: Union[bool, str] = True,
                 timeout: float = 10.0):
        self.base = base_url.rstrip("/")
        self.token = token if token is not None else (read_token(token_file)
                                                      if token_file else None)
        self.timeout = timeout
        self.ssl: Optional[ssl.SSLContext] = None
        if self.base.startswith("https:"):
            if verify is False:
                self.ssl = ssl._create_unverified_context()
            elif isinstance(verify, str):
                self.ssl = ssl.create_default_context(cafile=verify)
            else:
                self.ssl = ssl.create_default_context()

    def request(self, method: str, route: str, body: Optional[bytes] = None,
                content_type: Optional[str] = None) -> Any:
        """One request on /api/v1/ROUTE: the decoded JSON answer (None when empty); RestError
        for an HTTP error answer."""
        req = urllib.request.Request(self.base + "/api/v1/" + route.lstrip("/"), data=body,
                                     method=method)
        req.add_header("Accept", "application/json")
        if content_type:
            req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.ssl) as r:
                data = r.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                problem = json.loads(raw)
                if not isinstance(problem, dict):
                    raise ValueError
            except ValueError:
                problem = {"title": e.reason, "detail": raw.decode("utf-8", "replace")[:500]}
            raise RestError(e.code, problem) from None
        return json.loads(data) if data else None

    def _json(self, method: str, route: str, obj: Any) -> Any:
        return self.request(method, route, json.dumps(obj).encode(), "application/json")

    def openapi(self) -> Dict[str, Any]:
        """The OpenAPI 3 document of the API."""
        return self.request("GET", "openapi.json")

    def status(self) -> Dict[str, Any]:
        """The control socket's status, as JSON."""
        return self.request("GET", "status")

    def devices(self) -> List[Dict[str, Any]]:
        """The compute devices (the list of the answer's `devices`)."""
        r = self.request("GET", "devices")
        return r["devices"] if isinstance(r, dict) and "devices" in r else r

    def aggregates(self) -> Dict[str, Any]:
        """Hit rate, peak-count histogram and virtual powder pattern (arrays as lists)."""
        return self.request("GET", "aggregates")

    def config(self) -> Dict[str, Any]:
        """{"yaml", "source", "config_hash"} of the configuration in force."""
        return self.request("GET", "config")

    def put_config(self, yaml: Optional[str] = None, config: Optional[Dict[str, Any]] = None,
                   path: Optional[str] = None) -> Dict[str, Any]:
        """Reloads from a YAML text, a configuration as a JSON-able dict, or a file path on
        faid's host (exactly one); answers like the control socket's reload."""
        if sum(x is not None for x in (yaml, config, path)) != 1:
            raise ValueError("put_config takes exactly one of yaml, config, path")
        if yaml is not None:
            return self.request("PUT", "config", yaml.encode(), "application/yaml")
        return self._json("PUT", "config", config if config is not None else {"path": path})

    def reset(self) -> Any:
        """Clears the aggregates."""
        return self.request("POST", "reset")

    def stop(self) -> Any:
        """Stops faid."""
        return self.request("POST", "stop")

    def writer(self) -> Dict[str, Any]:
        """The writer's target for the next series."""
        return self.request("GET", "writer")

    def set_writer(self, directory: Optional[str] = None,
                   prefix: Optional[str] = None) -> Dict[str, Any]:
        """Sets the writer's directory and/or file prefix for the next series."""
        body = {k: v for k, v in (("directory", directory), ("prefix", prefix)) if v is not None}
        return self._json("PUT", "writer", body)


__all__ = ["Rest", "RestError", "read_token"]
