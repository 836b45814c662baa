package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
)

// CheckDurability reads the configuration of the Redis behind c and returns a
// human warning for each setting under which it could lose timers (or any
// other coordination state): an eviction policy other than noeviction, and
// no persistence at all (appendonly no and an empty save schedule). No
// warnings means the configuration looks durable.
//
// It uses CONFIG GET. When Redis refuses it (renamed or disabled, as many
// managed services do, or denied by an ACL), the result is a warning saying
// durability could not be checked, not an error; an error means Redis could
// not be reached. With a Cluster client it checks the node that answers.
func CheckDurability(ctx context.Context, c goredis.UniversalClient) ([]string, error) {
	var cmds []*goredis.MapStringStringCmd
	_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, name := range []string{"maxmemory-policy", "appendonly", "save"} {
			cmds = append(cmds, p.ConfigGet(ctx, name))
		}
		return nil
	})
	if err != nil {
		if isRedisError(err) {
			return []string{fmt.Sprintf("redis: could not check durability (CONFIG GET refused: %v); make sure maxmemory-policy is noeviction and appendonly yes or a save schedule is set, or timers may be lost", err)}, nil
		}
		return nil, fmt.Errorf("coord/redis: CheckDurability: CONFIG GET: %w", err)
	}
	policy, okPolicy := cmds[0].Val()["maxmemory-policy"]
	aof, okAOF := cmds[1].Val()["appendonly"]
	save, okSave := cmds[2].Val()["save"]

	var warnings []string
	switch {
	case !okPolicy:
		warnings = append(warnings, "redis: could not read maxmemory-policy; make sure it is noeviction, or timers may be evicted")
	case policy != "noeviction":
		warnings = append(warnings, fmt.Sprintf("redis: maxmemory-policy is %s, so Redis may evict timers under memory pressure; set maxmemory-policy noeviction", policy))
	}
	switch {
	case !okAOF || !okSave:
		warnings = append(warnings, "redis: could not read appendonly and save; enable appendonly yes or a save schedule, or timers are lost when Redis restarts")
	case aof == "no" && save == "":
		warnings = append(warnings, "redis: no persistence (appendonly no and save \"\"), so every timer is lost when Redis restarts; enable appendonly yes or a save schedule")
	}
	return warnings, nil
}

// isRedisError reports whether err is an error reply from Redis, as opposed
// to a network or context error.
func isRedisError(err error) bool {
	var re goredis.Error
	return errors.As(err, &re)
}
