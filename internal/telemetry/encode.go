package telemetry

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP protobuf encoding of the SDK's spans, written straight into one
// buffer (an ExportTraceServiceRequest, opentelemetry-proto's
// collector/trace/v1): what the official exporter makes through the proto
// package's structs (tracetransform, then proto.Marshal), at about a tenth of
// its cost and without its dozens of allocations a span. Each message's size
// is computed before it is written (protobuf prefixes a message with its
// length); a span's once, kept in sizes.

// group is the spans of one resource and instrumentation scope, in their
// order.
type group struct {
	res   *resource.Resource
	scope instrumentation.Scope
	spans []int // indexes into the batch
}

// encoder encodes batches; its buffers are reused (it is not safe for
// concurrent use).
type encoder struct {
	buf    []byte
	sizes  []int // each span's encoded size, by its index in the batch
	groups []group
}

// encode returns the ExportTraceServiceRequest of spans, valid until the next
// call.
func (e *encoder) encode(spans []sdktrace.ReadOnlySpan) []byte {
	e.groups = e.groups[:0]
	e.sizes = e.sizes[:0]
	for i, s := range spans {
		e.sizes = append(e.sizes, spanSize(s))
		res, scope := s.Resource(), s.InstrumentationScope()
		k := -1
		for j := range e.groups {
			if g := &e.groups[j]; g.res.Equal(res) && g.scope == scope {
				k = j
				break
			}
		}
		if k < 0 {
			e.groups = append(e.groups, group{res: res, scope: scope})
			k = len(e.groups) - 1
		}
		e.groups[k].spans = append(e.groups[k].spans, i)
	}
	b := e.buf[:0]
	// The groups of one resource make one ResourceSpans, in the order the
	// resource came first.
	done := make([]bool, len(e.groups))
	for i := range e.groups {
		if done[i] {
			continue
		}
		res := e.groups[i].res
		n := 0
		if res != nil { // written when there is one, empty or not, as the official exporter does
			n += lenField(1, resourceSize(res))
		}
		for j := i; j < len(e.groups); j++ {
			if !done[j] && e.groups[j].res.Equal(res) {
				n += lenField(1, e.scopeSpansSize(&e.groups[j]))
			}
		}
		n += stringField(3, res.SchemaURL())
		b = protowire.AppendTag(b, 1, protowire.BytesType) // resource_spans
		b = protowire.AppendVarint(b, uint64(n))
		if res != nil {
			b = appendResource(b, res, resourceSize(res))
		}
		for j := i; j < len(e.groups); j++ {
			if !done[j] && e.groups[j].res.Equal(res) {
				done[j] = true
				b = e.appendScopeSpans(b, spans, &e.groups[j])
			}
		}
		b = appendString(b, 3, res.SchemaURL())
	}
	for i := range e.groups {
		e.groups[i].spans = e.groups[i].spans[:0]
	}
	e.buf = b
	return b
}

// lenField is the size of a length-delimited field of field number num
// holding n bytes.
func lenField(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// stringField is the size of a string field, 0 for "" (proto3 leaves it out).
func stringField(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return lenField(num, len(s))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func varintField(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func fixed64Field(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + 8
}

// count is a dropped count as a uint32, clamped.
func count(n int) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(min(int64(n), math.MaxUint32))
}

// unixNano is t's nanoseconds since the epoch, 0 before it.
func unixNano(ns int64) uint64 { return uint64(max(0, ns)) }

// resourceSize is the size of res's Resource message (its attributes).
func resourceSize(res *resource.Resource) int {
	if res == nil {
		return 0
	}
	n := 0
	for it := res.Iter(); it.Next(); {
		kv := it.Attribute()
		n += lenField(1, keyValueSize(kv))
	}
	return n
}

func appendResource(b []byte, res *resource.Resource, size int) []byte {
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	for it := res.Iter(); it.Next(); {
		b = appendKeyValue(b, 1, it.Attribute())
	}
	return b
}

// scopeSize is the size of the InstrumentationScope message; -1 for none.
func scopeSize(s instrumentation.Scope) int {
	if s == (instrumentation.Scope{}) {
		return -1
	}
	n := stringField(1, s.Name) + stringField(2, s.Version)
	for it := s.Attributes.Iter(); it.Next(); {
		n += lenField(3, keyValueSize(it.Attribute()))
	}
	return n
}

func (e *encoder) scopeSpansSize(g *group) int {
	n := 0
	if ss := scopeSize(g.scope); ss >= 0 {
		n += lenField(1, ss)
	}
	for _, i := range g.spans {
		n += lenField(2, e.sizes[i])
	}
	return n + stringField(3, g.scope.SchemaURL)
}

func (e *encoder) appendScopeSpans(b []byte, spans []sdktrace.ReadOnlySpan, g *group) []byte {
	b = protowire.AppendTag(b, 2, protowire.BytesType) // scope_spans
	b = protowire.AppendVarint(b, uint64(e.scopeSpansSize(g)))
	if ss := scopeSize(g.scope); ss >= 0 {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(ss))
		b = appendString(b, 1, g.scope.Name)
		b = appendString(b, 2, g.scope.Version)
		for it := g.scope.Attributes.Iter(); it.Next(); {
			b = appendKeyValue(b, 3, it.Attribute())
		}
	}
	for _, i := range g.spans {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(e.sizes[i]))
		b = appendSpan(b, spans[i])
	}
	return appendString(b, 3, g.scope.SchemaURL)
}

// flags is a span's or a link's flags field: the W3C trace flags, and
// whether the parent (or the linked span) is remote, which is always known.
func flags(tf trace.TraceFlags, other trace.SpanContext) uint32 {
	f := uint32(tf) | 0x100 // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
	if other.IsRemote() {
		f |= 0x200 // SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
	}
	return f
}

// statusCode is OTLP's status code of c (UNSET 0, OK 1, ERROR 2).
func statusCode(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	}
	return 0
}

func statusSize(st sdktrace.Status) int {
	return stringField(2, st.Description) + varintField(3, statusCode(st.Code))
}

func spanSize(s sdktrace.ReadOnlySpan) int {
	sc := s.SpanContext()
	n := lenField(1, 16) + lenField(2, 8) + stringField(3, sc.TraceState().String())
	if s.Parent().SpanID().IsValid() {
		n += lenField(4, 8)
	}
	n += protowire.SizeTag(16) + 4 // flags, never 0
	n += stringField(5, s.Name()) + varintField(6, uint64(s.SpanKind()))
	n += fixed64Field(7, unixNano(s.StartTime().UnixNano())) + fixed64Field(8, unixNano(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		n += lenField(9, keyValueSize(kv))
	}
	n += varintField(10, count(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		n += lenField(11, eventSize(ev))
	}
	n += varintField(12, count(s.DroppedEvents()))
	for _, l := range s.Links() {
		n += lenField(13, linkSize(l))
	}
	n += varintField(14, count(s.DroppedLinks()))
	return n + lenField(15, statusSize(s.Status())) // status is always written, as the official exporter does
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, tid[:])
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, sid[:])
	b = appendString(b, 3, sc.TraceState().String())
	if psid := s.Parent().SpanID(); psid.IsValid() {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, psid[:])
	}
	b = appendString(b, 5, s.Name())
	b = appendVarint(b, 6, uint64(s.SpanKind()))
	b = appendFixed64(b, 7, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, 8, unixNano(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		b = appendKeyValue(b, 9, kv)
	}
	b = appendVarint(b, 10, count(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		b = protowire.AppendTag(b, 11, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(eventSize(ev)))
		b = appendFixed64(b, 1, unixNano(ev.Time.UnixNano()))
		b = appendString(b, 2, ev.Name)
		for _, kv := range ev.Attributes {
			b = appendKeyValue(b, 3, kv)
		}
		b = appendVarint(b, 4, count(ev.DroppedAttributeCount))
	}
	b = appendVarint(b, 12, count(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = protowire.AppendTag(b, 13, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(linkSize(l)))
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, ltid[:])
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, lsid[:])
		b = appendString(b, 3, l.SpanContext.TraceState().String())
		for _, kv := range l.Attributes {
			b = appendKeyValue(b, 4, kv)
		}
		b = appendVarint(b, 5, count(l.DroppedAttributeCount))
		b = protowire.AppendTag(b, 6, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, flags(l.SpanContext.TraceFlags(), l.SpanContext))
	}
	b = appendVarint(b, 14, count(s.DroppedLinks()))
	st := s.Status()
	b = protowire.AppendTag(b, 15, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(statusSize(st)))
	b = appendString(b, 2, st.Description)
	b = appendVarint(b, 3, statusCode(st.Code))
	b = protowire.AppendTag(b, 16, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, flags(sc.TraceFlags(), s.Parent()))
}

func eventSize(ev sdktrace.Event) int {
	n := fixed64Field(1, unixNano(ev.Time.UnixNano())) + stringField(2, ev.Name)
	for _, kv := range ev.Attributes {
		n += lenField(3, keyValueSize(kv))
	}
	return n + varintField(4, count(ev.DroppedAttributeCount))
}

func linkSize(l sdktrace.Link) int {
	n := lenField(1, 16) + lenField(2, 8) + stringField(3, l.SpanContext.TraceState().String())
	for _, kv := range l.Attributes {
		n += lenField(4, keyValueSize(kv))
	}
	return n + varintField(5, count(l.DroppedAttributeCount)) + protowire.SizeTag(6) + 4
}

// keyValueSize is the size of a KeyValue message.
func keyValueSize(kv attribute.KeyValue) int {
	return stringField(1, string(kv.Key)) + lenField(2, anyValueSize(kv.Value))
}

func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(keyValueSize(kv)))
	b = appendString(b, 1, string(kv.Key))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(anyValueSize(kv.Value)))
	return appendAnyValue(b, kv.Value)
}

// anyValueSize is the size of v's AnyValue message. A oneof member is
// written even when it is its type's zero value (it says which member is
// set).
func anyValueSize(v attribute.Value) int {
	switch v.Type() {
	case attribute.BOOL:
		return protowire.SizeTag(2) + 1
	case attribute.INT64:
		return protowire.SizeTag(3) + protowire.SizeVarint(uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return protowire.SizeTag(4) + 8
	case attribute.STRING:
		return lenField(1, len(v.AsString()))
	case attribute.BYTESLICE:
		return lenField(7, len(v.AsByteSlice()))
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE, attribute.SLICE:
		return lenField(5, arraySize(v))
	case attribute.MAP:
		n := 0
		for _, kv := range v.AsMap() {
			n += lenField(1, keyValueSize(kv))
		}
		return lenField(6, n)
	case attribute.EMPTY:
		return 0
	}
	return lenField(1, len("INVALID"))
}

func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, 4, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		return protowire.AppendString(b, v.AsString())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, 7, protowire.BytesType)
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE, attribute.SLICE:
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(arraySize(v)))
		for _, e := range elements(v) {
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(anyValueSize(e)))
			b = appendAnyValue(b, e)
		}
		return b
	case attribute.MAP:
		kvs := v.AsMap()
		n := 0
		for _, kv := range kvs {
			n += lenField(1, keyValueSize(kv))
		}
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		for _, kv := range kvs {
			b = appendKeyValue(b, 1, kv)
		}
		return b
	case attribute.EMPTY:
		return b
	}
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	return protowire.AppendString(b, "INVALID")
}

// arraySize is the size of the ArrayValue of a slice value.
func arraySize(v attribute.Value) int {
	n := 0
	for _, e := range elements(v) {
		n += lenField(1, anyValueSize(e))
	}
	return n
}

// elements returns a slice value's elements as values.
func elements(v attribute.Value) []attribute.Value {
	switch v.Type() {
	case attribute.BOOLSLICE:
		return valuesOf(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return valuesOf(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return valuesOf(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return valuesOf(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return v.AsSlice()
	}
	return nil
}

// valuesOf returns s's elements as values, each made by value.
func valuesOf[T any](s []T, value func(T) attribute.Value) []attribute.Value {
	out := make([]attribute.Value, len(s))
	for i, x := range s {
		out[i] = value(x)
	}
	return out
}
