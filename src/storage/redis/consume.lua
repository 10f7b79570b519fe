-- Single-use consume with a live recheck, atomically (docs/architecture.md, Consume paths).
-- KEYS[1] organization state, KEYS[2] agent state, KEYS[3] integration state
-- (a never-written placeholder when the capability has no integration),
-- KEYS[4] the capability's consumed marker. All share the organization's hash tag.
-- ARGV[1] marker lifetime in ms, ARGV[2] "1" when the capability is bound to an integration.
local org = redis.call('GET', KEYS[1])
local agent = redis.call('GET', KEYS[2])
local integration = 'active'
if ARGV[2] == '1' then integration = redis.call('GET', KEYS[3]) end
if not org or not agent or not integration then return 'MISS' end
if org ~= 'active' or agent ~= 'active' or integration ~= 'active' then return 'INACTIVE' end
if redis.call('SET', KEYS[4], 'consumed', 'NX', 'PX', ARGV[1]) then return 'OK' end
return 'CONSUMED'
