-- A row's lookup entries (derived/sinks/cache/lookups.py), put before the scripts that write rows.
-- Entries: a JSON array of [set key, member, score ("" in a set)]. A row's are kept under
-- 'cdckit:lk:' .. its data key, so the next write of the row knows what to take back.

-- Checked before any write: a script's writes are not undone when a later command fails, so a
-- set key holding another type must refuse the row's whole write, not half of it.
local function lookups_refused(spec)
  if spec == '' then return nil end
  for _, e in ipairs(cjson.decode(spec)) do
    local held = redis.call('TYPE', e[1]).ok
    local want = 'set'
    if e[3] ~= '' then want = 'zset' end
    if held ~= 'none' and held ~= want then
      return 'WRONGTYPE lookup key ' .. e[1] .. ' holds a ' .. held .. ', not a ' .. want
    end
  end
  return nil
end

-- A key the row's entry was in that holds another type now was replaced by someone else: the entry
-- is gone with it, and the row's write goes on (failing here would leave it half done).
local function lookups_drop(data)
  local mkey = 'cdckit:lk:' .. data
  local old = redis.call('GET', mkey)
  if not old then return end
  for _, e in ipairs(cjson.decode(old)) do
    local held = redis.call('TYPE', e[1]).ok
    if e[3] == '' and held == 'set' then redis.call('SREM', e[1], e[2])
    elseif e[3] ~= '' and held == 'zset' then redis.call('ZREM', e[1], e[2]) end
  end
  redis.call('DEL', mkey)
end

local function lookups_put(data, spec)
  lookups_drop(data)
  local new = cjson.decode(spec)
  if #new == 0 then return end
  for _, e in ipairs(new) do
    if e[3] == '' then redis.call('SADD', e[1], e[2]) else redis.call('ZADD', e[1], e[3], e[2]) end
  end
  redis.call('SET', 'cdckit:lk:' .. data, spec)
end

