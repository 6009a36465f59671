-- Versioned upsert. KEYS[1] data key, KEYS[2] version key, KEYS[3] the table's key counter.
-- ARGV: version, format ("json"|"hash"), payload (JSON object, stored as sent), ttl seconds (0 = none),
--       merge fields (JSON array; "hash" only), guard (the held version a "json" payload's unchanged
--       TOAST fields were read at, "" = none), lookup entries (lookups.lua; "" = the table has none),
--       then for "hash" the field/value pairs.
-- A version not above the stored one is stale: a replay never overwrites newer data.
-- Returns 1 applied, 0 stale, 2 the held version moved since the guard was read (merge again).
local held = redis.call('GET', KEYS[2])
-- A version written as '=' .. version also replaces an equal one (nested documents: a late, older
-- part changes the document without raising its version; see derived/nested.py).
local version, equal_ok = ARGV[1], false
if string.sub(version, 1, 1) == '=' then version = string.sub(version, 2); equal_ok = true end
if held and (held > version or (held == version and not equal_ok)) then return 0 end
if ARGV[6] ~= '' and held ~= ARGV[6] then return 2 end
local refused = lookups_refused(ARGV[7])
if refused then return redis.error_reply(refused) end
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('INCR', KEYS[3]) end
if ARGV[2] == 'json' then
  -- Stored as sent: the caller merged unchanged TOAST fields from the stored text, so no number is
  -- ever re-encoded here (Lua's cjson keeps 14 significant digits).
  redis.call('SET', KEYS[1], ARGV[3])
else
  local merge = cjson.decode(ARGV[5])
  local kept = {}
  for _, f in ipairs(merge) do
    local v = redis.call('HGET', KEYS[1], f)
    if v then kept[#kept + 1] = f; kept[#kept + 1] = v end
  end
  redis.call('DEL', KEYS[1])
  if #ARGV > 7 then redis.call('HSET', KEYS[1], unpack(ARGV, 8)) end
  if #kept > 0 then redis.call('HSET', KEYS[1], unpack(kept)) end
end
redis.call('SET', KEYS[2], version)
if ARGV[7] ~= '' then lookups_put(KEYS[1], ARGV[7]) end
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
end
return 1
