# rounds per visit (sweeps param) and push passes: fixed-model cut and 5 iterations
B=build-gpu/clients/masktool
for p in 2,0,64 4,0,64 16,0,64 8,8,64 8,16,64 8,32,64 ; do
  MASKD_PR_PARAMS=$p $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs 20 --warmup 5 > $O/p_$p.json 2>/dev/null
  python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]
print(sys.argv[2], " ".join("%s:%s=%.0f"%(x["op"].replace("grabcut","gc"),x["size"],x["median_us"]) for x in r if x["op"] in ("grabcut","grabcut-cut")))' $O/p_$p.json $p
done | tee $O/params.txt
