-- Versioned delete. KEYS[1] data key, KEYS[2] version key. ARGV: version, seconds to keep the version.
-- The version outlives the data so an older replayed upsert cannot resurrect the key.
local held = redis.call('GET', KEYS[2])
if held and held >= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], ARGV[1], 'EX', tonumber(ARGV[2]))
return 1
