#!/usr/bin/python3
"""Signs one S3 request with Debian's python3-botocore (S3SigV4Auth), an independent signer to
check ours (s3/sigv4.h) against: argv[1] is a JSON object {method, host, path (decoded), query
[[k, v], ...] (decoded), headers {..}, unsigned (bool), access, secret, region, time
("YYYYmmddTHHMMSSZ")}. Prints the Authorization header botocore computes at that time."""
import datetime
import json
import sys
from unittest import mock
from urllib.parse import quote

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials


def main():
    r = json.loads(sys.argv[1])
    url = "http://" + r["host"] + quote(r["path"], safe="/~")
    req = AWSRequest(method=r["method"], url=url, headers=dict(r.get("headers", {})), data=b"",
                     params=[(k, v) for k, v in r.get("query", [])])
    req.context["client_config"] = Config(s3={"payload_signing_enabled": not r["unsigned"]})
    fixed = datetime.datetime.strptime(r["time"], "%Y%m%dT%H%M%SZ")
    auth = S3SigV4Auth(Credentials(r["access"], r["secret"]), "s3", r["region"])
    with mock.patch("botocore.auth.datetime") as dt:
        dt.datetime.utcnow.return_value = fixed
        dt.datetime.now.return_value = fixed.replace(tzinfo=datetime.timezone.utc)
        auth.add_auth(req)
    print(req.headers["Authorization"])


if __name__ == "__main__":
    main()
