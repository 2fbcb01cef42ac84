"""Checks webhook deliveries with the official `standardwebhooks` package (testkit's
`verify_with_standardwebhooks`): the secret in WEBHOOK_SECRET, one JSON object a line on
stdin ({"headers": {name: value}, "body": text}), one line out for each: "ok" or
"failed: <why>"."""

import json
import os
import sys

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

webhook = Webhook(os.environ["WEBHOOK_SECRET"])
for line in sys.stdin:
    request = json.loads(line)
    try:
        webhook.verify(request["body"], request["headers"])
        print("ok")
    except WebhookVerificationError as error:
        print(f"failed: {error}")
