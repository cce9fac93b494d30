package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/pacer-go/pacer/internal/apisim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// small is a run of a couple of seconds: several 1 s windows, so pacing
// matters, on a loopback server without service time.
func small(style apisim.Style, client string) config {
	cfg := defaults()
	cfg.Style, cfg.Client = style, client
	cfg.Quota, cfg.Window, cfg.N, cfg.Concurrency, cfg.Latency = 10, time.Second, 25, 8, 0
	return cfg
}

func TestPacedFanoutSucceedsWithoutThrottlesAfterTheFirstResponse(t *testing.T) {
	for _, style := range []apisim.Style{apisim.StyleGitHub, apisim.StyleIETF} {
		t.Run(string(style), func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			res, err := run(context.Background(), small(style, clientPacer), &out, false)
			require.NoError(t, err)

			assert.Equal(t, 25, res.Succeeded, "every request succeeds")
			assert.Zero(t, res.Rejected+res.Errors)
			assert.Zero(t, res.ThrottledAfterFirst, "server 429s after the first response")
			assert.Equal(t, 25, res.Server.OK)
			assert.NotEmpty(t, res.Endpoints, "the summary reports the transport's endpoints")
			// 25 requests at 10/s with a full first window: well over a second.
			assert.Greater(t, res.Elapsed, time.Second, "the job was paced")

			s := out.String()
			assert.Contains(t, s, "done: 25/25 requests succeeded")
			assert.Contains(t, s, "goodput")
			assert.Contains(t, s, "endpoint  http://127.0.0.1:")
		})
	}
}

func TestPlainFanoutIsHandedTheServersThrottles(t *testing.T) {
	cfg := small(apisim.StyleGitHub, clientPlain)
	cfg.Window = time.Hour // one window: exactly Quota requests can succeed
	var out bytes.Buffer
	res, err := run(context.Background(), cfg, &out, false)
	require.NoError(t, err)

	assert.Equal(t, cfg.Quota, res.Succeeded)
	assert.Equal(t, cfg.N-cfg.Quota, res.Rejected)
	assert.Equal(t, cfg.N-cfg.Quota, res.Server.Throttled)
	assert.Nil(t, res.Endpoints)
	assert.Contains(t, out.String(), "15 429s: nothing paced the 8 workers")
}

func TestCompareRunsPlainThenPacedAndPrintsThemSideBySide(t *testing.T) {
	cfg := small(apisim.StyleGitHub, clientPacer)
	var out bytes.Buffer
	plain, paced, err := compare(context.Background(), cfg, &out, false)
	require.NoError(t, err)

	assert.Nil(t, plain.Endpoints, "the first run is the plain client")
	assert.Positive(t, plain.Server.Throttled, "8 unpaced workers overrun 10 per second")
	assert.NotEmpty(t, paced.Endpoints, "the second run goes through pacer")
	assert.Equal(t, cfg.N, paced.Succeeded)
	assert.Zero(t, paced.ThrottledAfterFirst)

	s := out.String()
	assert.Less(t, strings.Index(s, "run 1 of 2: plain"), strings.Index(s, "run 2 of 2: through pacer"))
	table := s[strings.Index(s, "compare: "):]
	assert.Regexp(t, fmt.Sprintf(`succeeded\s+%d/25\s+25/25\n`, plain.Succeeded), table)
	assert.Regexp(t, fmt.Sprintf(`server 429s\s+%d\s+%d\n`, plain.Server.Throttled, paced.Server.Throttled), table)
	assert.Regexp(t, `retries\s+–\s+\d+\n`, table)
}

func TestDefaultRunFitsInThirtySeconds(t *testing.T) {
	cfg := defaults()
	require.NoError(t, cfg.validate())
	// pacer spends safety × quota; the first window starts full, which only
	// shortens the run.
	paced := time.Duration(float64(cfg.N) / (cfg.Safety * quotaRate(cfg)) * float64(time.Second))
	assert.Less(t, paced, 25*time.Second, "the default job at the paced rate")
	assert.Greater(t, paced, 3*cfg.Window, "the default job spans several windows, so the pacing shows")
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want func(*config)
		err  string
	}{
		{args: nil, want: func(*config) {}},
		{args: []string{"-style", "retry-after", "-n", "50", "-quota", "7", "-window", "2s"}, want: func(c *config) {
			c.Style, c.N, c.Quota, c.Window = apisim.StyleRetryAfter, 50, 7, 2*time.Second
		}},
		{args: []string{"-client", "plain", "-unseen", "0.25", "-safety", "0.5", "-algorithm", "token-bucket"}, want: func(c *config) {
			c.Client, c.Unseen, c.Safety, c.Algorithm = clientPlain, 0.25, 0.5, apisim.TokenBucket
		}},
		{args: []string{"-compare"}, want: func(c *config) { c.Compare = true }},
		{args: []string{"-style", "bitbucket"}, err: `-style "bitbucket"`},
		{args: []string{"-algorithm", "leaky"}, err: `-algorithm "leaky"`},
		{args: []string{"-quota", "0"}, err: "-quota 0"},
		{args: []string{"-window", "0s"}, err: "-window 0s"},
		{args: []string{"-n", "-1"}, err: "-n -1"},
		{args: []string{"-concurrency", "0"}, err: "-concurrency 0"},
		{args: []string{"-safety", "1.5"}, err: "-safety 1.5"},
		{args: []string{"-safety", "NaN"}, err: "-safety NaN"},
		{args: []string{"-latency", "-1s"}, err: "-latency -1s"},
		{args: []string{"-unseen", "1"}, err: "-unseen 1"},
		{args: []string{"-client", "curl"}, err: `-client "curl"`},
		{args: []string{"extra"}, err: `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			cfg, err := parseFlags(tc.args, &stderr)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.Contains(t, stderr.String(), tc.err, "the user is told what was wrong")
				return
			}
			require.NoError(t, err)
			want := defaults()
			tc.want(&want)
			assert.Equal(t, want, cfg)
		})
	}
}

func TestProgressPrintsPlainLinesWhenNotATerminal(t *testing.T) {
	var out bytes.Buffer
	p := &progress{out: &out, total: 400, sample: func() sample { return sample{done: 36, throttled: 1, limit: "limit 18.0/s (headers)"} }}
	p.draw(2*time.Second, false)
	p.draw(3*time.Second, true)
	assert.Equal(t,
		"   2.0s   36/400 done   18.0 req/s  server 429s: 1  limit 18.0/s (headers)\n"+
			"   3.0s   36/400 done    0.0 req/s  server 429s: 1  limit 18.0/s (headers)\n",
		out.String())
}

func TestProgressRedrawsOneLineOnATerminal(t *testing.T) {
	var out bytes.Buffer
	done := 100
	p := &progress{out: &out, tty: true, total: 400, sample: func() sample { return sample{done: done, limit: "no limiter"} }}
	p.draw(time.Second, false)
	done = 400
	p.draw(2*time.Second, true)
	lines := strings.Split(out.String(), "\r")
	require.Len(t, lines, 3)
	assert.Equal(t, "[====>           ] 100/400  100.0 req/s  429s 0  no limiter  1.0s\x1b[K", lines[1])
	assert.Equal(t, "[================] 400/400  300.0 req/s  429s 0  no limiter  2.0s\x1b[K\n", lines[2],
		"the final draw ends the line")
}

func TestProgressStopWaitsForTheLastDraw(t *testing.T) {
	var out lockedBuffer
	p := &progress{out: &out, tty: true, total: 1, sample: func() sample { return sample{done: 1} }}
	stop := p.start(time.Now())
	stop()
	stop() // idempotent
	assert.True(t, strings.HasSuffix(out.String(), "\n"), "the final state is drawn and the line ended before stop returns")
}

func TestBar(t *testing.T) {
	for _, tc := range []struct {
		done, total int
		want        string
	}{
		{0, 10, "[          ]"},
		{1, 10, "[=>        ]"},
		{5, 10, "[=====>    ]"},
		{10, 10, "[==========]"},
		{12, 10, "[==========]"},
		{0, 0, "[          ]"},
	} {
		assert.Equal(t, tc.want, bar(tc.done, tc.total, 10), "%d/%d", tc.done, tc.total)
	}
}

// lockedBuffer is a bytes.Buffer safe for the progress goroutine and the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
