package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pacer-go/pacer/store"
)

// leaseSource keeps one quota's fleet budget, atomically, on the Redis
// clock: the arithmetic of store.Memory's budgetState (store/budget.go),
// which the conformance suite checks both against. Times are microseconds.
//
// The budget is a hash: floor is the lowest sighting figure of the window
// (Remaining less what the sighting's member then held), known whether a
// window is open, reset when it ends (0: none stated); each member is a
// field "m:<id>" holding "held expires". The budget is floor less what
// every live member holds.
const leaseSource = `
local key = KEYS[1]
local member = 'm:' .. ARGV[1]
local held = tonumber(ARGV[2])
local take = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local rem = ARGV[5]
local resetIn = tonumber(ARGV[6])
local sheld = tonumber(ARGV[7])
local idle = tonumber(ARGV[8])
local ractive = tonumber(ARGV[9])
local rfloor = tonumber(ARGV[10])
local ridle = tonumber(ARGV[11])
local iago = tonumber(ARGV[12])
local unbudgeted = tonumber(ARGV[13])
local slack = 1000000

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local h = redis.call('HMGET', key, 'floor', 'known', 'reset', 'ia')
local floor = tonumber(h[1]) or 0
local known = h[2] == '1'
local reset = tonumber(h[3]) or 0
local ia = tonumber(h[4])
if iago >= 0 and (ia == nil or now - iago > ia) then
	ia = now - iago
	redis.call('HSET', key, 'ia', string.format('%.17g', ia))
end

redis.call('HSET', key, member, string.format('%.17g %.17g', held, now + ttl))
local all = redis.call('HGETALL', key)
local total = 0
local members = 0
for i = 1, #all, 2 do
	local f = all[i]
	if string.sub(f, 1, 2) == 'm:' then
		local hv, ex = string.match(all[i + 1], '(%S+) (%S+)')
		if tonumber(ex) < now then
			redis.call('HDEL', key, f)
			if known then floor = floor - tonumber(hv) end
		else
			total = total + tonumber(hv)
			members = members + 1
		end
	end
end
if known and reset > 0 and now >= reset then
	known = false
end
if rem ~= '' then
	local figure = tonumber(rem) - sheld
	local r = 0
	if resetIn > 0 then r = now + resetIn end
	slack = math.min(slack, math.max(resetIn / 2, 100000))
	if known and r > 0 and reset > 0 and r < reset - slack then
		-- overtaken: a figure of the window before
	elseif (not known) or r == 0 or r > reset + slack then
		known = true
		floor = figure
		reset = r
	else
		floor = math.min(floor, figure)
	end
end
local granted = 0
local budget = 0
local resetOut = 0
if known then
	budget = floor - total
	local leave = 0
	if ractive >= 0 then
		leave = rfloor
		if ia ~= nil and now - ia < ridle then leave = math.max(leave, ractive) end
	end
	if take > 0 and budget - leave > 0 then
		granted = math.min(take, budget - leave)
		budget = budget - granted
		redis.call('HSET', key, member, string.format('%.17g %.17g', held + granted, now + ttl))
	end
	if reset > 0 then resetOut = reset - now end
elseif unbudgeted > 0 then
	redis.call('HSET', key, member, string.format('%.17g %.17g', held + unbudgeted, now + ttl))
end
local k = '0'
if known then k = '1' end
redis.call('HSET', key, 'floor', string.format('%.17g', floor), 'known', k, 'reset', string.format('%.17g', reset))
local keep = idle + ttl / 1000
if known and reset > now then keep = keep + (reset - now) / 1000 end
redis.call('PEXPIRE', key, math.ceil(math.min(keep, 1e15)))
return {k, string.format('%.17g', granted), string.format('%.17g', math.max(budget, 0)), math.floor(math.max(resetOut, 0)), members}
`

var leaseScript = redis.NewScript(leaseSource)

var _ store.Budgeter = (*Store)(nil)

// budgetSuffix names a quota's budget hash beside its key's bucket. The NUL
// keeps it apart from every endpoint key.
const budgetSuffix = "\x00budget\x00"

// Lease implements [store.Budgeter]. The budget lives in Redis alone: a
// call that cannot reach the key's shard fails (with the shard's error, or
// at once while the shard is down), and the member goes by its own model
// until it can. Under FailClosed the same: a member's own model is no
// request sent past the store's word, only one that does not know it.
func (s *Store) Lease(ctx context.Context, key string, r store.LeaseRequest) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, err
	}
	bkey := key + budgetSuffix + r.Quota
	s.route(ctx)
	sh := s.shardOf(bkey)
	h := s.healthOf(sh)
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return store.Lease{}, ErrClosed
	case h.down:
		return store.Lease{}, &ShardError{Shard: sh.addr, Err: h.cause}
	}
	ttl := r.TTL
	if ttl <= 0 {
		ttl = store.DefaultLeaseTTL
	}
	rem, resetIn, sheld := "", int64(0), 0.0
	if sg := r.Seen; sg != nil && sg.Remaining >= 0 && sg.Remaining <= 1e15 {
		rem = formatFloat(sg.Remaining)
		if sg.ResetIn > 0 {
			// Rounded up: 0 would say the quota states no reset, a
			// window that never ends.
			resetIn = int64((sg.ResetIn + time.Microsecond - 1) / time.Microsecond)
		}
		sheld = nonNegative(sg.Held)
	}
	ractive, rfloor, ridle := -1.0, 0.0, int64(0)
	if rv := r.Reserve; rv != nil {
		ractive, rfloor, ridle = nonNegative(rv.Active), nonNegative(rv.Floor), max(rv.Idle.Microseconds(), 0)
	}
	iago := int64(-1)
	if r.InteractiveAgo >= 0 {
		iago = r.InteractiveAgo.Microseconds()
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	s.calls.Add(1)
	res, err := leaseScript.Run(cctx, s.client, []string{s.prefix + bkey},
		r.Member, formatFloat(nonNegative(r.Held)), formatFloat(nonNegative(r.Take)), ttl.Microseconds(),
		rem, resetIn, formatFloat(sheld), s.idleTTL.Milliseconds(),
		formatFloat(ractive), formatFloat(rfloor), ridle, iago, formatFloat(nonNegative(r.Unbudgeted)),
	).Slice()
	if err != nil {
		if ctx.Err() != nil {
			return store.Lease{}, ctx.Err()
		}
		err = classify(cctx, sh.addr, err)
		s.failed(h, bkey, err)
		return store.Lease{}, err
	}
	return parseLease(res)
}

func parseLease(res []any) (store.Lease, error) {
	if len(res) != 5 {
		return store.Lease{}, fmt.Errorf("redisstore: unexpected lease reply %v", res)
	}
	k, ok1 := res[0].(string)
	g, ok2 := res[1].(string)
	b, ok3 := res[2].(string)
	reset, ok4 := res[3].(int64)
	members, ok5 := res[4].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return store.Lease{}, fmt.Errorf("redisstore: unexpected lease reply %v", res)
	}
	granted, err1 := strconv.ParseFloat(g, 64)
	budget, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil {
		return store.Lease{}, fmt.Errorf("redisstore: unexpected lease reply %v", res)
	}
	return store.Lease{Known: k == "1", Granted: granted, Budget: budget, ResetIn: time.Duration(reset) * time.Microsecond, Members: int(members)}, nil
}

// nonNegative is v when it is a finite number not below zero, else 0.
func nonNegative(v float64) float64 {
	if !(v >= 0) || v > 1e15 {
		return 0
	}
	return v
}
