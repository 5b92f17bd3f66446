"""Tiny API helper for the demo: stop a container by ID@GENERATION.
The key comes from MAINBRELLA_API_KEY, the URL from MAINBRELLA_API_URL."""
import os
import sys
import urllib.error
import urllib.parse
import urllib.request


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "delete":
        sys.exit("usage: demo_api.py delete ID@GENERATION")
    cid, gen = sys.argv[2].split("@", 1)
    q = urllib.parse.urlencode({"id": cid, "createdAt": gen}, quote_via=urllib.parse.quote)
    req = urllib.request.Request(os.environ["MAINBRELLA_API_URL"] + "/containers?" + q, method="DELETE",
                                 headers={"Authorization": "Bearer " + os.environ["MAINBRELLA_API_KEY"]})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            print(r.status)
    except urllib.error.HTTPError as e:
        print(e.code)


if __name__ == "__main__":
    main()
