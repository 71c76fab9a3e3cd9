"""An RFC 9421 verifier that reads a request as Python's, Go's and Node's HTTP stacks hand it
over: every field's lines joined with ", " (RFC 9110 §5.3) before anything parses them. The
signature fields are parsed as RFC 9651 dictionaries by http_sfv (PyPI http-sfv), the
signature base is built from the joined values, and Ed25519 is checked by `cryptography`.

Reads JSON on stdin: {"method", "authority", "target" (origin form), "scheme",
"headers": [[name, value], ...] (the lines as received), "label", "keys": {keyid: base64 of the
raw 32-byte public key}}. Prints "ok" and exits 0, or prints why not and exits 1.
(Used by tests/proxy/signing_cosign.rs.)
"""

import base64
import json
import sys

import http_sfv
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def main():
    req = json.load(sys.stdin)
    joined = {}
    for name, value in req["headers"]:
        name = name.lower()
        joined[name] = joined[name] + ", " + value.strip() if name in joined else value.strip()

    def dictionary(name):
        d = http_sfv.Dictionary()
        d.parse(joined[name].encode("ascii"))
        return d

    try:
        inputs = dictionary("signature-input")
        signatures = dictionary("signature")
    except Exception as e:  # what a joining verifier answers
        return fail(f"Signature-Input/Signature is not an RFC 9651 Dictionary: {e}")
    label = req["label"]
    if label not in inputs or label not in signatures:
        return fail(f"no label {label}")
    path, _, query = req["target"].partition("?")
    derived = {
        "@method": req["method"],
        "@authority": req["authority"],
        "@path": path,
        "@query": "?" + query,
        "@scheme": req["scheme"],
        "@target-uri": f'{req["scheme"]}://{req["authority"]}{req["target"]}',
    }
    lines = []
    for item in inputs[label]:
        name = item.value
        key = item.params.get("key")
        ident = str(item)
        if name in derived:
            value = derived[name]
        elif name not in joined:
            return fail(f"{ident} is not in the request")
        elif key is not None:
            try:
                member = dictionary(name)[key]
            except Exception as e:
                return fail(f"{name} is neither an sf-dictionary with {key} ({e})")
            lst = http_sfv.List()
            lst.append(member)
            value = str(lst)
        else:
            value = joined[name]
        lines.append(f"{ident}: {value}")
    params = str(inputs[label])
    lines.append(f'"@signature-params": {params}')
    base = "\n".join(lines).encode()
    keyid = inputs[label].params.get("keyid")
    if keyid not in req["keys"]:
        return fail(f"unknown keyid {keyid}")
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(req["keys"][keyid]))
    try:
        public.verify(signatures[label].value, base)
    except Exception:
        return fail(f"{label}: the signature does not verify")
    print("ok")
    return 0


def fail(why):
    print(why)
    return 1


if __name__ == "__main__":
    sys.exit(main())
