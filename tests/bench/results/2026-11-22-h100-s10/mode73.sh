B=build-gpu/clients/masktool
for m in 1; do
for p in 8,0,64 16,0,64 32,0,64; do
  MASKD_PR_MODE=$m MASKD_PR_PARAMS=$p $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs 20 --warmup 5 > $O/m${m}_$p.json 2>/dev/null
  python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]
print(sys.argv[2], " ".join("%s:%s=%.0f/%s"%(x["op"].replace("grabcut","gc"),x["size"],x["median_us"],x.get("rounds")) for x in r if x["op"] in ("grabcut","grabcut-cut")))' $O/m${m}_$p.json "mode$m $p"
done; done | tee $O/modes.txt
MASKD_PR_MODE=1 timeout 200 meson test -C build-gpu --no-rebuild maxflow_cuda grabcut_cuda > $O/test_mode1.log 2>&1; echo "mode1 tests rc=$?"
