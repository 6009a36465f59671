-- Delete after a tombstone whose op=d record is not in the batch (derived/reduce.py: settle_tombstones).
-- KEYS as delete.lua. ARGV: seconds to keep the version, '1' when the table has lookups (lookups.lua).
-- Removes whatever is held. The version kept is the one just below the held one: a redelivered
-- copy of that very change is applied again, anything older stays refused.
local held = redis.call('GET', KEYS[2])
if redis.call('DEL', KEYS[1]) == 1 then redis.call('DECR', KEYS[3]) end
if ARGV[2] == '1' then lookups_drop(KEYS[1]) end
if not held then return 1 end
-- Versions are fixed-width digit strings (derived/change.py): one below, in string order.
local digits = {}
for i = 1, #held do digits[i] = held:sub(i, i) end
for i = #held, 1, -1 do
  if digits[i] ~= '0' then
    digits[i] = string.char(digits[i]:byte() - 1)
    redis.call('SET', KEYS[2], table.concat(digits), 'EX', tonumber(ARGV[1]))
    return 1
  end
  digits[i] = '9'
end
redis.call('DEL', KEYS[2])
return 1
