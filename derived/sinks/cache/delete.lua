-- Versioned delete. KEYS[1] data key, KEYS[2] version key, KEYS[3] the table's key counter. ARGV: version, seconds to keep the version.
-- The version outlives the data so an older replayed upsert cannot resurrect the key.
local held = redis.call('GET', KEYS[2])
if held and held >= ARGV[1] then return 0 end
if redis.call('DEL', KEYS[1]) == 1 then redis.call('DECR', KEYS[3]) end
redis.call('SET', KEYS[2], ARGV[1], 'EX', tonumber(ARGV[2]))
return 1
