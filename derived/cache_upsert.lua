-- Versioned upsert. KEYS[1] data key, KEYS[2] version key, KEYS[3] the table's key counter.
-- ARGV: version, format ("json"|"hash"), payload (JSON object, stored as sent), ttl seconds (0 = none),
--       merge fields (JSON array), then for "hash" the field/value pairs.
-- A version not above the stored one is stale: a replay never overwrites newer data.
local held = redis.call('GET', KEYS[2])
if held and held >= ARGV[1] then return 0 end
local merge = cjson.decode(ARGV[5])
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('INCR', KEYS[3]) end
if ARGV[2] == 'json' then
  local payload = ARGV[3]
  local old = (#merge > 0) and redis.call('GET', KEYS[1])
  if old then
    -- Unchanged TOAST columns arrive without a value: keep what is stored (re-encoded only here).
    local doc, prev = cjson.decode(payload), cjson.decode(old)
    for _, f in ipairs(merge) do if prev[f] ~= nil then doc[f] = prev[f] end end
    payload = cjson.encode(doc)
  end
  redis.call('SET', KEYS[1], payload)
else
  local kept = {}
  for _, f in ipairs(merge) do
    local v = redis.call('HGET', KEYS[1], f)
    if v then kept[#kept + 1] = f; kept[#kept + 1] = v end
  end
  redis.call('DEL', KEYS[1])
  if #ARGV > 5 then redis.call('HSET', KEYS[1], unpack(ARGV, 6)) end
  if #kept > 0 then redis.call('HSET', KEYS[1], unpack(kept)) end
end
redis.call('SET', KEYS[2], ARGV[1])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
end
return 1
