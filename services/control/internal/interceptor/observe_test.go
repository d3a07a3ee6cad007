package interceptor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"msgexchange/libs/logging"
)

// TestObserve_R_F4_RecordsDurationByMethodAndCode: every call, refused or
// not, lands in msgx_control_rpc_duration with its method and code.
func TestObserve_R_F4_RecordsDurationByMethodAndCode(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	o, err := NewObserve(logging.Discard(), provider.Meter("test"))
	require.NoError(t, err)

	info := &grpc.UnaryServerInfo{FullMethod: "/msgx.control.v1.AdminService/GetMessage"}
	_, err = o.Unary()(context.Background(), nil, info, func(context.Context, any) (any, error) {
		return nil, status.Error(codes.NotFound, "message 1 not found")
	})
	require.Equal(t, codes.NotFound, status.Code(err))
	_, err = o.Unary()(context.Background(), nil, info, func(context.Context, any) (any, error) { return "ok", nil })
	require.NoError(t, err)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	require.Len(t, rm.ScopeMetrics[0].Metrics, 1)
	m := rm.ScopeMetrics[0].Metrics[0]
	require.Equal(t, "msgx_control_rpc_duration", m.Name)
	require.Equal(t, "s", m.Unit)
	hist, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok)
	codesSeen := map[string]uint64{}
	for _, dp := range hist.DataPoints {
		method, _ := dp.Attributes.Value(attribute.Key("rpc_method"))
		require.Equal(t, info.FullMethod, method.AsString())
		code, _ := dp.Attributes.Value(attribute.Key("rpc_code"))
		codesSeen[code.AsString()] += dp.Count
	}
	require.Equal(t, map[string]uint64{"NotFound": 1, "OK": 1}, codesSeen)
}
