"""One HTTPS request through the proxy configured by `aileron session env`.

usage: client.py urllib|requests|httpx METHOD URL [JSON_BODY]
Prints {"status", "headers", "body"} as JSON, or {"error"} when no HTTP
response arrived. Run with Debian's /usr/bin/python3 (python3-requests,
python3-httpx).
"""
import json
import sys


def main():
    mode, method, url = sys.argv[1:4]
    body = sys.argv[4].encode() if len(sys.argv) > 4 and sys.argv[4] else None
    headers = {"Content-Type": "application/json"} if body is not None else {}
    try:
        if mode == "urllib":
            status, hdrs, data = via_urllib(method, url, body, headers)
        elif mode == "requests":
            status, hdrs, data = via_requests(method, url, body, headers)
        elif mode == "httpx":
            status, hdrs, data = via_httpx(method, url, body, headers)
        else:
            raise SystemExit("unknown mode " + mode)
    except Exception as e:  # report, do not crash: the Go test prints it
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
        return
    print(json.dumps({"status": status, "headers": hdrs, "body": data.decode("utf-8", "replace")}))


def via_urllib(method, url, body, headers):
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, dict(r.headers.items()), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers.items()), e.read()


def via_requests(method, url, body, headers):
    import requests

    r = requests.request(method, url, data=body, headers=headers, timeout=60, allow_redirects=False)
    return r.status_code, dict(r.headers), r.content


def via_httpx(method, url, body, headers):
    import httpx

    # trust_env (the default) reads HTTPS_PROXY and SSL_CERT_FILE.
    with httpx.Client(timeout=60, follow_redirects=False) as c:
        r = c.request(method, url, content=body, headers=headers)
        return r.status_code, dict(r.headers), r.content


main()
