-- Versioned delete. KEYS[1] data key, KEYS[2] version key, KEYS[3] the table's key counter.
-- ARGV: version, seconds to keep the version, '1' when the table has lookups (lookups.lua).
-- The version outlives the data so an older replayed upsert cannot resurrect the key.
local held = redis.call('GET', KEYS[2])
-- A version written as '=' .. version also replaces an equal one (nested documents: a late, older
-- part changes the document without raising its version; see derived/nested.py).
local version, equal_ok = ARGV[1], false
if string.sub(version, 1, 1) == '=' then version = string.sub(version, 2); equal_ok = true end
if held and (held > version or (held == version and not equal_ok)) then return 0 end
if redis.call('DEL', KEYS[1]) == 1 then redis.call('DECR', KEYS[3]) end
if ARGV[3] == '1' then lookups_drop(KEYS[1]) end
redis.call('SET', KEYS[2], version, 'EX', tonumber(ARGV[2]))
return 1
