// Package telemetry sets up the binary's OpenTelemetry tracing from the
// standard environment (Setup): an OTLP exporter over HTTP (http/protobuf, the
// default) or gRPC, the resource from OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, the sampler from OTEL_TRACES_SAMPLER and the batch
// span processor from OTEL_BSP_*, as the SDK reads them. With nothing
// configured there is no provider and no exporter: Tracing.TracerProvider is
// nil, and the packages that trace (mcp, mcp/client) then make no span at all.
package telemetry
