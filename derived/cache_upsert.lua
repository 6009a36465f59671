-- Versioned upsert. KEYS[1] data key, KEYS[2] version key.
-- ARGV: version, format ("json"|"hash"), payload (JSON object), ttl seconds (0 = none), merge fields (JSON array).
-- A version not above the stored one is stale: a replay never overwrites newer data.
local held = redis.call('GET', KEYS[2])
if held and held >= ARGV[1] then return 0 end
local doc = cjson.decode(ARGV[3])
local merge = cjson.decode(ARGV[5])
if #merge > 0 then
  -- Unchanged TOAST columns arrive without a value: keep what is stored.
  if ARGV[2] == 'json' then
    local old = redis.call('GET', KEYS[1])
    if old then
      local prev = cjson.decode(old)
      for _, f in ipairs(merge) do if prev[f] ~= nil then doc[f] = prev[f] end end
    end
  else
    for _, f in ipairs(merge) do
      local v = redis.call('HGET', KEYS[1], f)
      if v then doc[f] = v end
    end
  end
end
redis.call('DEL', KEYS[1])
if ARGV[2] == 'json' then
  redis.call('SET', KEYS[1], cjson.encode(doc))
else
  local flat = {}
  for f, v in pairs(doc) do
    flat[#flat + 1] = f
    if type(v) == 'table' then flat[#flat + 1] = cjson.encode(v)
    elseif v == cjson.null then flat[#flat + 1] = ''
    else flat[#flat + 1] = tostring(v) end
  end
  if #flat > 0 then redis.call('HSET', KEYS[1], unpack(flat)) end
end
redis.call('SET', KEYS[2], ARGV[1])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
end
return 1
