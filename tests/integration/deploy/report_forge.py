"""Sends the service two Report messages it must reject, over one Report stream, and checks its
summary: one with a client address that is no address ("bad_client"), one with an address but
neither a window nor an RTT ("no_value"). The messages are encoded by hand (protobuf wire format,
proto/spand/v1: client_address = 1, a string: tag 0x0a; wc_segments = 2, a varint: tag 0x10), so
only python3-grpcio is needed. Usage: report_forge.py HOST:PORT. Prints the summary's counts."""
import sys

import grpc


def field_string(number, text):
    b = text.encode()
    assert len(b) < 128  # one-byte length
    return bytes([number << 3 | 2, len(b)]) + b


def field_varint(number, value):
    assert value < 128  # one-byte varint
    return bytes([number << 3, value])


def varints(data):
    """ReportSummary's fields (accepted = 1, rejected = 2: varints; first_error = 3: string)."""
    out, i = {}, 0
    while i < len(data):
        key, i = data[i], i + 1
        if key & 7 == 0:
            value, shift = 0, 0
            while True:
                value |= (data[i] & 0x7F) << shift
                shift, i = shift + 7, i + 1
                if not data[i - 1] & 0x80:
                    break
            out[key >> 3] = value
        else:  # a string: length (under 128 here) and bytes
            n = data[i]
            out[key >> 3] = data[i + 1:i + 1 + n].decode()
            i += 1 + n
    return out


def main(target):
    forged = [
        field_string(1, "not-an-address") + field_varint(2, 30),  # bad_client
        field_string(1, "10.99.0.9"),                              # no_value
    ]
    with grpc.insecure_channel(target) as ch:
        report = ch.stream_unary("/spand.v1.Estimates/Report")  # bytes in, bytes out
        summary = varints(report(iter(forged), timeout=5))
    print("report: accepted=%d rejected=%d first_error=%s"
          % (summary.get(1, 0), summary.get(2, 0), summary.get(3, "")))
    # Both messages rejected, none accepted.
    return 0 if summary.get(2, 0) == 2 and summary.get(1, 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
