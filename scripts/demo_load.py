"""Demo load: sends TF Serving REST predict requests for N seconds and reports how many requests each
model version served (the server names it in the X-Model-Version response header), plus failures.

Usage: demo_load.py PREDICT_URL SECONDS
"""
import collections
import json
import sys
import time
import urllib.error
import urllib.request

from sklearn.datasets import load_digits


def main():
    url, seconds = sys.argv[1], float(sys.argv[2])
    body = json.dumps({"instances": load_digits().data[:1].tolist()}).encode()
    served, failures = collections.Counter(), []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as r:
                json.load(r)
                # Through the router, x-modelfleet-version names the version; the server says X-Model-Version.
                served[r.headers.get("x-modelfleet-version") or r.headers.get("X-Model-Version", "?")] += 1
        except (urllib.error.URLError, OSError, ValueError) as e:
            failures.append(str(e))
    total = sum(served.values()) + len(failures)
    print(f"  {total} requests in {seconds:.0f} s, {len(failures)} failed")
    for version, n in sorted(served.items()):
        print(f"  {n} answered by version {version}")
    for f in failures[:5]:
        print(f"  failure: {f}")


if __name__ == "__main__":
    main()
