package resume_test

import "testing"

// TestWithoutStore runs the engine's tests again on engines without a Store, which
// keep the queued messages in their outboxes (what serve does without --data-dir
// or --nats-url). The tests that look into the store are not among them.
func TestWithoutStore(t *testing.T) {
	withoutStore = true
	t.Cleanup(func() { withoutStore = false })
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"StartAndLookup", TestStartAndLookup}, {"StartValues", TestStartValues},
		{"ExpiryNeverAttached", TestExpiryNeverAttached}, {"MaxWaitReset", TestMaxWaitReset},
		{"WriteFailureDetaches", TestWriteFailureDetaches}, {"Retention", TestRetention},
		{"RetentionWhileAttached", TestRetentionWhileAttached}, {"TombstoneTTL", TestTombstoneTTL},
		{"MaxTombstones", TestMaxTombstones}, {"CancelCompleted", TestCancelCompleted},
		{"MaxLive", TestMaxLive}, {"MaxLivePerPrincipal", TestMaxLivePerPrincipal},
		{"MaxRetained", TestMaxRetained}, {"DeliveredRetention", TestDeliveredRetention},
		{"Close", TestClose}, {"LookupAsPrincipal", TestLookupAsPrincipal},
		{"DeliveryNonAck", TestDeliveryNonAck}, {"DetachOtherSink", TestDetachOtherSink},
		{"Takeover", TestTakeover}, {"AckReplay", TestAckReplay},
		{"FirstAckSwitchesMode", TestFirstAckSwitchesMode}, {"AckExactlyOnceAcrossDrops", TestAckExactlyOnceAcrossDrops},
		{"AckFinalOnAttach", TestAckFinalOnAttach}, {"ServerRequest", TestServerRequest},
		{"BudgetCoalescesProgress", TestBudgetCoalescesProgress}, {"BudgetDropsNotifications", TestBudgetDropsNotifications},
		{"BudgetKeepsRequestsAndResponse", TestBudgetKeepsRequestsAndResponse}, {"ConcurrentAppendAttach", TestConcurrentAppendAttach},
		{"RetentionWaitsForWrite", TestRetentionWaitsForWrite}, {"DetachedSinkIsReleased", TestDetachedSinkIsReleased},
		{"Stats", TestStats},
	} {
		t.Run(tc.name, tc.f)
	}
}
