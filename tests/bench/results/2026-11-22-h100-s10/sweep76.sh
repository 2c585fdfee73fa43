# tile 16: sweeps x push passes (margin 64)
export MASKD_PR_TILE=16
for p in 8,0,64 4,0,64 12,0,64 8,8,64 8,16,64 8,32,64 6,12,64 12,24,64; do
  MASKD_PR_PARAMS=$p $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs 15 --warmup 5 > $O/p16_$p.json 2>/dev/null
  python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]
print(sys.argv[2], " ".join("%s:%s=%.0f"%(x["op"].replace("grabcut","gc"),x["size"],x["median_us"]) for x in r if x["op"] in ("grabcut","grabcut-cut")))' $O/p16_$p.json "t16 $p"
done | tee $O/params16.txt
unset MASKD_PR_TILE
