set -u
mkdir -p /tmp/lr
setsid nohup bash -c 'OUT=/tmp/lr bash test/gpu/run_all.sh long-run > /tmp/lr/main.log 2>&1; touch /tmp/lr/done' > /dev/null 2>&1 < /dev/null &
sleep 215
bash test/gpu/run_all.sh advice
while [ $SECONDS -lt 575 ] && [ ! -f /tmp/lr/done ]; do sleep 5; done
echo "=== long-run so far"; tail -n 30 /tmp/lr/long-run.log 2>/dev/null
mkdir -p $OUT/lr-partial; cp -r /tmp/lr/. $OUT/lr-partial/ 2>/dev/null; true
