"""A fake spand.v1 Report sink for the agent's tests: a gRPC server (grpcio, messages from the
descriptor set the build produces) that implements only Estimates.Report and prints each
ReportSample it receives as one JSON line on stdout. Other methods answer UNIMPLEMENTED, which
the agent counts as gRPC errors and treats as "no estimate".

usage: report_sink.py DESCRIPTOR_SET LISTEN_ADDR
"""
import json
import signal
import sys
from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def main():
    desc_path, listen = sys.argv[1], sys.argv[2]
    fds = descriptor_pb2.FileDescriptorSet()
    with open(desc_path, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    factory = message_factory.MessageFactory(pool)
    sample_cls = factory.GetPrototype(pool.FindMessageTypeByName("spand.v1.ReportSample"))
    summary_cls = factory.GetPrototype(pool.FindMessageTypeByName("spand.v1.ReportSummary"))

    def report(request_iterator, context):
        summary = summary_cls()
        for s in request_iterator:
            print(json.dumps({"client": s.client_address, "wc_segments": s.wc_segments,
                              "rtt_us": s.rtt_us, "source": s.source}), flush=True)
            summary.accepted += (s.wc_segments != 0) + (s.rtt_us != 0)
        return summary

    handler = grpc.method_handlers_generic_handler("spand.v1.Estimates", {
        "Report": grpc.stream_unary_rpc_method_handler(
            report, request_deserializer=sample_cls.FromString,
            response_serializer=summary_cls.SerializeToString)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    if server.add_insecure_port(listen) == 0:
        sys.exit("report_sink: cannot listen on " + listen)
    server.start()
    print("serving " + listen, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    server.stop(0)


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    main()
