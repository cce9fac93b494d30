package redisstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pacer-go/pacer/store"
)

// reserveScript books tokens of one GCRA bucket, atomically, on the Redis
// clock. It is the arithmetic of store.Memory's gcraState (store/memory.go),
// which the conformance suite checks both against; times are microseconds.
//
// The bucket is a hash: tat is the theoretical arrival time of the next token,
// pu the end of a pause; lim, bur and la hold the learned limit, its burst and when it was
// learned. Floats are written with %.17g so nothing is lost in the round trip
// through strings.
//
// It also takes tokens back (a refund of ARGV[6] tokens standing for ARGV[8]
// microseconds, applied first; n = 0 books nothing), so a process hands back
// the rest of an old lease in the same round trip that takes a new one.
const reserveSource = `
local key = KEYS[1]
local n = tonumber(ARGV[1])
local T = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local maxwait = tonumber(ARGV[4])
local first = tonumber(ARGV[5])
local refund = tonumber(ARGV[6])
local ttl = tonumber(ARGV[7])
local refundT = tonumber(ARGV[8])
-- Replies and PEXPIRE take integers: keep hostile magnitudes representable.
local function clamp(x) return math.max(-1e15, math.min(1e15, x)) end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local h = redis.call('HMGET', key, 'tat', 'pu', 'lim', 'bur', 'la')
local exists = h[1] or h[2] or h[3]
local tat = tonumber(h[1])
local pu = tonumber(h[2]) or 0
local dirty = false

if tat and refund > 0 then
	tat = tat - refundT
	dirty = true
end
if tat == nil then tat = now end

local start = math.max(now, pu)
local pause = start - now
local ok = 1
local base = 0
if T > 0 and n > 0 then
	local from = math.max(tat, start)
	base = from - burst * T - now
	if maxwait >= 0 and math.max(pause, base + first * T) > maxwait then
		ok = 0
	else
		tat = from + n * T
		dirty = true
	end
elseif maxwait >= 0 and pause > maxwait then
	ok = 0
end

if dirty then
	redis.call('HSET', key, 'tat', string.format('%.17g', tat))
end
if dirty or exists then
	local keep = math.max(tat - now, pu - now, 0) / 1000 + ttl
	redis.call('PEXPIRE', key, math.ceil(clamp(keep)))
end
local age = -1
if h[5] then age = now - tonumber(h[5]) end
return {ok, math.floor(clamp(base)), math.floor(clamp(pause)), h[3], tonumber(h[4]) or 0, math.floor(clamp(age))}
`

// publishSource records a learned limit (ARGV[1] = "" for none, ARGV[2] its
// burst) stamped with the Redis clock, and extends the pause to at least
// ARGV[3] microseconds from now.
const publishSource = `
local key = KEYS[1]
local pause = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if ARGV[1] ~= '' then
	redis.call('HSET', key, 'lim', ARGV[1], 'bur', ARGV[2], 'la', string.format('%.17g', now))
end
local h = redis.call('HMGET', key, 'tat', 'pu')
local pu = tonumber(h[2]) or 0
if pause > 0 and now + pause > pu then
	pu = now + pause
	redis.call('HSET', key, 'pu', string.format('%.17g', pu))
end
if ARGV[1] ~= '' or pause > 0 then
	local keep = math.max((tonumber(h[1]) or now) - now, pu - now, 0) / 1000 + ttl
	redis.call('PEXPIRE', key, math.ceil(math.min(keep, 1e15)))
end
return 1
`

var (
	reserveScript = redis.NewScript(reserveSource)
	publishScript = redis.NewScript(publishSource)
)

// booking is one reservation or lease as the script computes it.
type booking struct {
	tokens   float64       // tokens to book
	interval float64       // seconds per token; 0 books nothing
	burst    int           // bucket capacity
	maxWait  time.Duration // < 0: unbounded
	first    float64       // tokens the caller needs now; maxWait applies to them
	refund   giveBack      // returned before booking
}

// giveBack is booked tokens going back to a bucket: how many, and how much
// of its schedule they stood for (each was booked at its own limit).
type giveBack struct {
	tokens float64
	secs   float64
}

func (g *giveBack) add(tokens, interval float64) {
	g.tokens += tokens
	g.secs += tokens * interval
}

func (g *giveBack) merge(o giveBack) {
	g.tokens += o.tokens
	g.secs += o.secs
}

// reply is the script's answer: the j-th booked token (1-based) may be used
// max(pause, base + j*interval) seconds after the answer.
type reply struct {
	ok     bool
	base   float64 // seconds
	pause  float64 // seconds
	shared store.State
}

// at is when the first j booked tokens may be used, in seconds after the
// answer.
func (r reply) at(j, interval float64) float64 {
	return max(r.pause, r.base+j*interval, 0)
}

// runReserve runs the reservation script for key through c (the store's
// client, or a master's own client for a probe); errors are *ShardError
// naming shard.
func (s *Store) runReserve(ctx context.Context, c redis.Scripter, shard, key string, b booking) (reply, error) {
	s.calls.Add(1)
	maxWait := int64(-1)
	if b.maxWait >= 0 {
		maxWait = b.maxWait.Microseconds()
	}
	res, err := reserveScript.Run(ctx, c, []string{s.prefix + key},
		formatFloat(b.tokens), formatFloat(b.interval*1e6), b.burst, maxWait,
		formatFloat(b.first), formatFloat(b.refund.tokens), s.idleTTL.Milliseconds(),
		formatFloat(b.refund.secs*1e6),
	).Slice()
	if err != nil {
		return reply{}, classify(ctx, shard, err)
	}
	return parseReply(res)
}

func (s *Store) runPublish(ctx context.Context, shard, key string, st store.State) error {
	s.calls.Add(1)
	limit := ""
	if st.Limit > 0 {
		limit = formatFloat(float64(st.Limit))
	}
	err := publishScript.Run(ctx, s.client, []string{s.prefix + key},
		limit, max(st.Burst, 1), st.Pause.Microseconds(), s.idleTTL.Milliseconds(),
	).Err()
	return classify(ctx, shard, err)
}

func parseReply(res []any) (reply, error) {
	if len(res) != 6 {
		return reply{}, fmt.Errorf("redisstore: unexpected script reply %v", res)
	}
	ints := make([]int64, 6)
	for _, i := range []int{0, 1, 2, 4, 5} {
		v, ok := res[i].(int64)
		if !ok {
			return reply{}, fmt.Errorf("redisstore: unexpected script reply %v", res)
		}
		ints[i] = v
	}
	r := reply{
		ok:    ints[0] == 1,
		base:  float64(ints[1]) / 1e6,
		pause: float64(ints[2]) / 1e6,
	}
	r.shared.Pause = time.Duration(ints[2]) * time.Microsecond
	if lim, ok := res[3].(string); ok {
		if v, err := strconv.ParseFloat(lim, 64); err == nil && v > 0 && ints[5] >= 0 {
			r.shared.Limit = v
			r.shared.Burst = int(max(ints[4], 1))
			r.shared.Age = time.Duration(ints[5]) * time.Microsecond
		}
	}
	return r, nil
}

// formatFloat renders v exactly; Lua's tonumber reads it back bit for bit.
func formatFloat(v float64) string {
	if math.IsInf(v, 1) || v > math.MaxFloat64 {
		v = math.MaxFloat64
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
