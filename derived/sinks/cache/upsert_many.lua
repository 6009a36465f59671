-- Versioned upserts of many keys in one call (plain upserts: nothing to merge, no guard), each by
-- the rule of upsert.lua. KEYS: per item its data key, version key and the table's key counter.
-- ARGV: per item version, format ("json"|"hash"), the payload (json) or the number of field/value
-- arguments that follow (hash), ttl seconds (0 = none), lookup entries (lookups.lua; "" = none), then
-- for "hash" the field/value pairs.
-- Returns per item 1 applied, 0 stale, or the error's text (that key alone failed: the others
-- are written, as one call per key would). New keys are counted once per counter at the end.
local added = {}
local function upsert(i, a, nfields)
  local data, vkey = KEYS[i], KEYS[i + 1]
  local version, format, ttl = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 3])
  local equal_ok = false
  if string.sub(version, 1, 1) == '=' then version = string.sub(version, 2); equal_ok = true end
  local held = redis.call('GET', vkey)
  if held and (held > version or (held == version and not equal_ok)) then return 0 end
  local lookups = ARGV[a + 4]
  local refused = lookups_refused(lookups)
  if refused then error({err = refused}) end
  local new = redis.call('EXISTS', data) == 0
  if format == 'json' then
    redis.call('SET', data, ARGV[a + 2])
  else
    redis.call('DEL', data)
    if nfields > 0 then redis.call('HSET', data, unpack(ARGV, a + 5, a + 4 + nfields)) end
  end
  redis.call('SET', vkey, version)
  if lookups ~= '' then lookups_put(data, lookups) end
  if new then added[KEYS[i + 2]] = (added[KEYS[i + 2]] or 0) + 1 end
  if ttl > 0 then
    redis.call('EXPIRE', data, ttl)
    redis.call('EXPIRE', vkey, ttl)
  end
  return 1
end

-- The call's first write touches each counter: under maxmemory Redis refuses a script's first
-- write, not the ones after it (a hash key's DEL is not refused), so an out-of-memory server
-- refuses the whole call here, before any key; a counter of another type fails it here too.
local counters = {}
for i = 3, #KEYS, 3 do
  if not counters[KEYS[i]] then
    counters[KEYS[i]] = true
    redis.call('INCRBY', KEYS[i], 0)
  end
end

local out = {}
local a = 1
for i = 1, #KEYS, 3 do
  local nfields = 0
  if ARGV[a + 1] == 'hash' then nfields = tonumber(ARGV[a + 2]) end
  local ok, res = pcall(upsert, i, a, nfields)
  if ok then
    out[#out + 1] = res
  elseif type(res) == 'table' and res.err then
    out[#out + 1] = res.err
  else
    out[#out + 1] = tostring(res)
  end
  a = a + 5 + nfields
end
for counter, n in pairs(added) do redis.call('INCRBY', counter, n) end
return out
