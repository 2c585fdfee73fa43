for T in auto 32; do
  if [ $T = auto ]; then unset MASKD_PR_TILE; else export MASKD_PR_TILE=$T; fi
  timeout 100 $B bench pipeline --backend cuda --size 1280x720 --frames 600 --inflight 2 --per-frame > $O/pf_${T}_720.json 2>$O/pf_${T}_720.log; echo "720 $T rc=$?"
  python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k,r in d["runs"].items(): print(sys.argv[2], k, "fps", r["fps"], "e2e", r["e2e_ms"]["p50"], r["e2e_ms"]["p99"], {s:(v["p50"],v["p99"]) for s,v in r["stages_ms"].items() if s in ("detect","cut","guided")})
print(sys.argv[2], "differ", d["identical"]["frames_differing"])' $O/pf_${T}_720.json $T | tee -a $O/pf_summary.txt
done
unset MASKD_PR_TILE
