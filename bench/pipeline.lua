-- pipeline.lua - wrk script: 16 pipelined GET /hello per write.
-- wrk parses the string request() returns once at start-up to learn how many
-- requests it holds, then counts every response it parses, so Requests/sec
-- stays a per-request figure and the next batch leaves only when all 16
-- responses of the previous one arrived.
local depth = 16
local batch

init = function(args)
  local one = wrk.format("GET", "/hello")
  local t = {}
  for i = 1, depth do
    t[i] = one
  end
  batch = table.concat(t)
end

request = function()
  return batch
end
