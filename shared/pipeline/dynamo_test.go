package pipeline

import (
	"testing"

	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
)

// The pipeline's store-backed behaviour (billing, keys, idempotency, the
// cache, limits, fair use) proven again on DynamoDB Local.
func TestOnDynamoDB(t *testing.T) {
	onDynamo := func(t *testing.T, credits int64, limit *int64, mutate ...func(*Config)) *billed {
		return newBilledOn(t, dynamotest.NewStore(t), credits, limit, mutate...)
	}
	for name, test := range map[string]func(*testing.T, billedFactory){
		"BatchOfTwentyWithEveryOutcome":             testBatchOfTwentyWithEveryOutcome,
		"BatchOfMixedItems":                         testBatchOfMixedItems,
		"BatchItemOutOfCreditsTouchesOnlyItself":    testBatchItemOutOfCreditsTouchesOnlyItself,
		"CacheMissThenHitCostsNothing":              testCacheMissThenHitCostsNothing,
		"CacheSharesEquivalentSpellingsAndAccounts": testCacheSharesEquivalentSpellingsAndAccounts,
		"FailuresAreNeverCached":                    testFailuresAreNeverCached,
		"CacheControlAndExpiry":                     testCacheControlAndExpiry,
		"DryRunSnapshot":                            testDryRunSnapshot,
		"IdempotentConcurrentRequestsRunOnce":       testIdempotentConcurrentRequestsRunOnce,
		"IdempotencyKeyRules":                       testIdempotencyKeyRules,
		"RetryableOutcomesAreNotStored":             testRetryableOutcomesAreNotStored,
		"RefusalsFreeTheIdempotencyKey":             testRefusalsFreeTheIdempotencyKey,
		"InProgressComesBeforeReuse":                testInProgressComesBeforeReuse,
		"RateLimitWindow":                           testRateLimitWindow,
		"ConcurrencyLimit":                          testConcurrencyLimit,
		"LimitsHoldUnderContention":                 func(t *testing.T, f billedFactory) { testLimitsHoldUnderContention(t, f, false) },
		"FairUseCeiling":                            testFairUseCeiling,
		"FairUseCountsAttemptsNotCacheHits":         testFairUseCountsAttemptsNotCacheHits,
		"PaidCallSucceeds":                          testPaidCallSucceeds,
		"FailedPaidCallsRefund":                     testFailedPaidCallsRefund,
		"PaymentRefusals":                           testPaymentRefusals,
		"ConcurrentPaidCallsNeverOverspend":         testConcurrentPaidCallsNeverOverspend,
		"KeysAreCheckedOnEveryRequest":              testKeysAreCheckedOnEveryRequest,
		"CreditsEndpoints":                          testCreditsEndpoints,
		"CreditsUsageReportsTheWorkersCounts":       testCreditsUsageReportsTheWorkersCounts,
		"DryRunChargesNothing":                      testDryRunChargesNothing,
		"UpstreamFaultMatrix":                       testUpstreamFaultMatrix,
		"UpstreamFailover":                          testUpstreamFailover,
		"CompositeChargesOnceAndLegsNothing":        testCompositeChargesOnceAndLegsNothing,
		"CompositeStreams":                          testCompositeStreams,
		"LegsNeverFillTheSharedCache":               testLegsNeverFillTheSharedCache,
		"LegsStayWithinFreeSlots":                   testLegsStayWithinFreeSlots,
		"ConcurrentCompositesNeverOverspend":        testConcurrentCompositesNeverOverspend,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, onDynamo)
		})
	}
}

// The limits record refuses, never admits uncounted, when DynamoDB
// throttles its hot item (one write in three refused here).
func TestLimitsHoldWhileDynamoDBThrottles(t *testing.T) {
	testLimitsHoldUnderContention(t, func(t *testing.T, credits int64, limit *int64, mutate ...func(*Config)) *billed {
		return newBilledOn(t, dynamotest.NewStoreWith(t, dynamotest.ThrottleWrites("keyhash#", 3)), credits, limit, mutate...)
	}, true)
}
