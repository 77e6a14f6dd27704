-- Handler of fixed cost for the bench's Apache backend: sleep @SERVICE_US@ µs, answer "ok".
-- The sleep holds the worker thread, so capacity depends on the workers, not on the 2 CPUs
-- the clients and contenders share.
function handle(r)
    r.usleep(@SERVICE_US@)
    r.content_type = "text/plain"
    r:puts("ok\n")
    return apache2.OK
end
