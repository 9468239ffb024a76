#!/usr/bin/python3
"""Uploads a file as a multipart upload with Debian's python3-botocore, as S3 clients do for large
objects (velero, the registry): argv HOST BUCKET KEY FILE PARTS. The file is cut into PARTS parts
of equal size (the last takes the rest); s3rver (tests/s3/s3rver/serve.js) then lists the object
with an ETag "<md5>-PARTS", as MinIO does. Prints that ETag, as CompleteMultipartUpload answers
it."""
import sys

import botocore.session
from botocore.config import Config


def main():
    host, bucket, key, path, parts = sys.argv[1:6]
    parts = int(parts)
    s3 = botocore.session.get_session().create_client(
        "s3", region_name="us-east-1", endpoint_url="http://" + host,
        aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
        config=Config(s3={"addressing_style": "path"}))
    with open(path, "rb") as f:
        data = f.read()
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    step = len(data) // parts
    done = []
    for n in range(parts):
        chunk = data[n * step:] if n == parts - 1 else data[n * step:(n + 1) * step]
        etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=n + 1,
                              Body=chunk)["ETag"]
        done.append({"PartNumber": n + 1, "ETag": etag})
    answer = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload,
                                          MultipartUpload={"Parts": done})
    print(answer["ETag"].strip('"'))


if __name__ == "__main__":
    main()
