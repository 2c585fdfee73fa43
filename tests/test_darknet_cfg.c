/* test_darknet_cfg: the cfg parser — a table of {cfg text, expected result, message fragment}, the values it
 * reads (defaults, Darknet's padding rules, anchors through the mask, resolved indices), and every cfg of the
 * shared data. */
#include "testutil.h"

#include "darknet_cfg.h"
#include "imageio.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Four lines: errors in the layers below start at line 5. */
#define NET "[net]\nwidth=32\nheight=32\nchannels=3\n"
#define CONV "[convolutional]\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n"

static const struct {
    const char *name, *text;
    int code;
    const char *msg; /* fragment of the message (file:line included) */
} cases[] = {
    /* accepted */
    {"minimal", NET CONV, 0, NULL},
    {"comments, blanks, spaces, CRLF", "# a comment\r\n; another\r\n\r\n[net]\r\n  width = 32 \r\nheight=32\r\n"
     "channels= 3\r\n\r\n[convolutional]\r\nfilters = 8 # not a comment: an error\r\n", MK_EFORMAT,
     "t.cfg:10: [convolutional] filters=8 # not a comment: an error: not an integer"},
    {"spaces and comments", "# c\n\n[net]\n  width = 32 \nheight=32\n\tchannels=\t3\n; c\n[conv]\nsize = 1\n", 0, NULL},
    {"training keys of [net]", "[net]\nbatch=64\nsubdivisions=16\nwidth=32\nheight=32\nchannels=3\nmomentum=0.9\n"
     "decay=0.0005\nangle=0\nsaturation=1.5\nexposure=1.5\nhue=.1\nlearning_rate=0.001\nburn_in=1000\n"
     "max_batches=500200\npolicy=steps\nsteps=400000,450000\nscales=.1,.1\nmosaic=1\n" CONV, 0, NULL},
    {"training keys of [yolo] and [dropout]", NET "[convolutional]\nfilters=18\nactivation=linear\n[dropout]\n"
     "probability=.5\n[yolo]\nmask=0,1,2\nanchors=1,2,3,4,5,6\nclasses=1\nnum=3\njitter=.3\nignore_thresh=.7\n"
     "truth_thresh=1\nrandom=1\nscale_x_y=1.05\niou_thresh=0.213\ncls_normalizer=1.0\niou_normalizer=0.07\n"
     "iou_loss=ciou\nnms_kind=greedynms\nbeta_nms=0.6\nmax_delta=5\nresize=1.5\n", 0, NULL},
    {"per-layer training keys", NET CONV "stopbackward=1\nlearning_rate=0.5\n", 0, NULL},
    /* lines */
    {"empty", "", MK_EFORMAT, "t.cfg:1: no sections"},
    {"no [net] first", CONV, MK_EFORMAT, "t.cfg:1: the first section must be [net], not [convolutional]"},
    {"key before a section", "width=3\n[net]\n", MK_EFORMAT, "t.cfg:1: width=3 before the first [section]"},
    {"unclosed header", "[net\nwidth=3\n", MK_EFORMAT, "t.cfg:1: section header '[net' has no closing ']'"},
    {"empty header", "[ ]\n", MK_EFORMAT, "t.cfg:1: empty section name"},
    {"no '='", NET "[convolutional]\nfilters 8\n", MK_EFORMAT, "t.cfg:6: 'filters 8' is neither"},
    {"no key", NET "[convolutional]\n=8\n", MK_EFORMAT, "t.cfg:6: '=8' has no key"},
    {"no value", NET "[convolutional]\nfilters=\n", MK_EFORMAT, "t.cfg:6: filters= has no value"},
    {"only [net]", NET, MK_EFORMAT, "t.cfg:1: no layers after [net]"},
    {"[net] again", NET CONV "[net]\n", MK_EFORMAT, "t.cfg:11: [net] may only be the first section"},
    /* sections and keys */
    {"unknown section", NET "[convolution]\n", MK_EFORMAT, "t.cfg:5: unknown section [convolution]"},
    {"[region]", NET "[region]\nclasses=80\n", MK_EUNSUPPORTED, "t.cfg:5: [region] layers are not supported"},
    {"[reorg]", NET "[reorg]\nstride=2\n", MK_EUNSUPPORTED, "t.cfg:5: [reorg] layers are not supported"},
    {"[local]", NET "[local]\n", MK_EUNSUPPORTED, "t.cfg:5: [local] layers are not supported"},
    {"unknown key", NET "[convolutional]\nsise=3\n", MK_EFORMAT, "t.cfg:6: unknown key 'sise' in [convolutional]"},
    {"unknown [net] key", "[net]\nwidht=3\n", MK_EFORMAT, "t.cfg:2: unknown key 'widht' in [net]"},
    {"unsupported key", NET CONV "dilation=2\n", MK_EUNSUPPORTED, "t.cfg:11: [convolutional] dilation= is not supported"},
    {"dontload", NET CONV "dontload=1\n", MK_EUNSUPPORTED, "t.cfg:11: [convolutional] dontload= is not supported"},
    {"[net] inputs=", "[net]\ninputs=256\n", MK_EUNSUPPORTED, "t.cfg:2: [net] inputs= is not supported"},
    {"duplicate key", NET "[convolutional]\nsize=3\nfilters=2\nsize=1\n", MK_EFORMAT,
     "t.cfg:8: [convolutional] size= given twice (first at line 6)"},
    {"training key outside its section", NET "[maxpool]\njitter=.3\n", MK_EFORMAT,
     "t.cfg:6: unknown key 'jitter' in [maxpool]"},
    /* numbers */
    {"word for int", NET "[convolutional]\nsize=abc\n", MK_EFORMAT, "t.cfg:6: [convolutional] size=abc: not an integer"},
    {"trailing junk", NET "[convolutional]\nsize=3x\n", MK_EFORMAT, "t.cfg:6: [convolutional] size=3x: not an integer"},
    {"float for int", NET "[convolutional]\nsize=1.5\n", MK_EFORMAT, "size=1.5: not an integer"},
    {"huge int", NET "[convolutional]\nfilters=99999999999999999999\n", MK_EFORMAT, "not an integer"},
    {"zero size", NET "[convolutional]\nsize=0\n", MK_EFORMAT, "t.cfg:6: [convolutional] size=0: out of range 1..63"},
    {"negative filters", NET "[convolutional]\nfilters=-4\n", MK_EFORMAT, "filters=-4: out of range 1.."},
    {"zero stride", NET "[convolutional]\nstride=0\n", MK_EFORMAT, "stride=0: out of range 1..64"},
    {"zero groups", NET "[convolutional]\ngroups=0\n", MK_EFORMAT, "groups=0: out of range"},
    {"pad is a flag", NET "[convolutional]\npad=2\n", MK_EFORMAT, "pad=2: out of range 0..1"},
    {"batch_normalize=2", NET "[convolutional]\nbatch_normalize=2\n", MK_EFORMAT, "batch_normalize=2: out of range"},
    {"negative padding", NET "[maxpool]\npadding=-1\n", MK_EFORMAT, "t.cfg:6: [maxpool] padding=-1: out of range"},
    {"zero maxpool size", NET "[maxpool]\nsize=0\n", MK_EFORMAT, "[maxpool] size=0: out of range"},
    {"maxpool_depth", NET "[maxpool]\nmaxpool_depth=1\n", MK_EUNSUPPORTED, "maxpool_depth= is not supported"},
    {"[net] zero width", "[net]\nwidth=0\n", MK_EFORMAT, "t.cfg:2: [net] width=0: out of range 1..16384"},
    {"[net] no channels", "[net]\nwidth=32\nheight=32\n" CONV, MK_EFORMAT, "t.cfg:1: [net] has no channels="},
    {"bad float", NET "[upsample]\nscale=abc\n", MK_EFORMAT, "t.cfg:6: [upsample] scale=abc: not a finite number"},
    {"nan", NET "[upsample]\nscale=nan\n", MK_EFORMAT, "scale=nan: not a finite number"},
    {"inf", NET "[upsample]\nscale=inf\n", MK_EFORMAT, "scale=inf: not a finite number"},
    {"NUL byte", NET "[conv\0olutional]\n", MK_EFORMAT, "t.cfg:5: NUL byte"},
    /* activations */
    {"unsupported activation", NET "[convolutional]\nactivation=swish\n", MK_EUNSUPPORTED,
     "t.cfg:6: [convolutional] activation=swish is not supported"},
    {"unknown activation", NET "[convolutional]\nactivation=leakyy\n", MK_EFORMAT,
     "t.cfg:6: [convolutional] activation=leakyy: unknown activation"},
    {"shortcut activation", NET CONV "[shortcut]\nfrom=-1\nactivation=elu\n", MK_EUNSUPPORTED, "activation=elu"},
    /* route and shortcut indices */
    {"route without layers", NET CONV "[route]\n", MK_EFORMAT, "t.cfg:11: [route] has no layers="},
    {"route before the first layer", NET CONV "[route]\nlayers=-2\n", MK_EFORMAT,
     "t.cfg:12: [route] layers=-2: -2 names layer -1, but layer 1 can only use layers 0..0"},
    {"route forward", NET CONV "[route]\nlayers=1\n", MK_EFORMAT, "layers=1: 1 names layer 1, but layer 1 can only"},
    {"route to itself", NET CONV "[route]\nlayers=0,-1,0\n", 0, NULL},
    {"route empty item", NET CONV "[route]\nlayers=-1,,0\n", MK_EFORMAT, "t.cfg:12: [route] layers=-1,,0: empty list item"},
    {"route trailing comma", NET CONV "[route]\nlayers=-1,\n", MK_EFORMAT, "empty list item"},
    {"route bad number", NET CONV "[route]\nlayers=-1,x\n", MK_EFORMAT, "layers=-1,x: 'x' is not an integer"},
    {"route nine inputs", NET CONV "[route]\nlayers=0,0,0,0,0,0,0,0,0\n", MK_EUNSUPPORTED, "more than 8 values"},
    {"route groups=0", NET CONV "[route]\nlayers=-1\ngroups=0\n", MK_EFORMAT, "groups=0: out of range"},
    {"route group_id", NET CONV "[route]\nlayers=-1\ngroups=2\ngroup_id=2\n", MK_EFORMAT,
     "t.cfg:14: [route] group_id=2: out of range 0..1"},
    {"shortcut without from", NET CONV "[shortcut]\n", MK_EFORMAT, "t.cfg:11: [shortcut] has no from="},
    {"shortcut of two", NET CONV CONV "[shortcut]\nfrom=-1,-2\n", MK_EUNSUPPORTED, "only one layer is supported"},
    {"shortcut first", NET "[shortcut]\nfrom=-1\n", MK_EFORMAT, "[shortcut] from=-1: -1 names layer -1, but layer 0"},
    {"shortcut weights", NET CONV CONV "[shortcut]\nfrom=-2\nweights_type=per_channel\n", MK_EUNSUPPORTED,
     "weights_type= is not supported"},
    /* upsample */
    {"downsample", NET "[upsample]\nstride=-2\n", MK_EUNSUPPORTED, "t.cfg:6: [upsample] stride=-2: downsampling"},
    {"upsample stride=0", NET "[upsample]\nstride=0\n", MK_EFORMAT, "t.cfg:6: [upsample] stride=0: must be at least 1"},
    /* yolo */
    {"yolo without anchors", NET "[yolo]\nclasses=1\n", MK_EFORMAT, "t.cfg:5: [yolo] has no anchors="},
    {"yolo anchors count", NET "[yolo]\nnum=3\nanchors=1,2,3,4,5\n", MK_EFORMAT,
     "t.cfg:7: [yolo] anchors=: 5 values, num=3 needs 6"},
    {"yolo bad anchor", NET "[yolo]\nanchors=1,x\n", MK_EFORMAT, "anchors=: 'x' is not a non-negative number"},
    {"yolo negative anchor", NET "[yolo]\nanchors=1,-2\n", MK_EFORMAT, "'-2' is not a non-negative number"},
    {"yolo mask out of range", NET "[yolo]\nnum=2\nmask=0,2\nanchors=1,2,3,4\n", MK_EFORMAT,
     "t.cfg:7: [yolo] mask=0,2: 2 out of range 0..1"},
    {"yolo classes=0", NET "[yolo]\nclasses=0\nanchors=1,2\n", MK_EFORMAT, "classes=0: out of range"},
    {"yolo num=0", NET "[yolo]\nnum=0\nanchors=1,2\n", MK_EFORMAT, "num=0: out of range"},
    {"yolo scale_x_y=0", NET "[yolo]\nscale_x_y=0\nanchors=1,2\n", MK_EFORMAT, "scale_x_y=0: out of range"},
    {"yolo new_coords", NET "[yolo]\nanchors=1,2\nnew_coords=1\n", MK_EUNSUPPORTED, "new_coords= is not supported"},
    {"yolo 17 anchors without mask", NET "[yolo]\nnum=17\nanchors=1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
     "1,1,1,1,1,1,1,1\n", MK_EUNSUPPORTED, "num=17 without mask=: more than 16 anchors"},
};

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mk_darknet_cfg_t cfg;
        size_t len = strlen(cases[i].text);
        if (!strcmp(cases[i].name, "NUL byte"))
            len += 1 + strlen(cases[i].text + len + 1);
        mk_err_clear();
        int rc = mk_darknet_cfg_parse(cases[i].text, len, "t.cfg", &cfg);
        if (rc != cases[i].code)
            fail_msg("case '%s': got %s (%s), expected %s", cases[i].name, mk_err_name(rc), mk_err_msg(),
                     mk_err_name(cases[i].code));
        if (cases[i].msg && !strstr(mk_err_msg(), cases[i].msg))
            fail_msg("case '%s': message '%s' lacks '%s'", cases[i].name, mk_err_msg(), cases[i].msg);
        if (!rc) {
            assert_int_equal(cfg.width, 32);
            assert_true(cfg.n_layers >= 1);
            mk_darknet_cfg_free(&cfg);
        } else {
            assert_null(cfg.layers);
        }
    }
}

static mk_darknet_cfg_t parse_ok(const char *text)
{
    mk_darknet_cfg_t cfg;
    TU_OK(mk_darknet_cfg_parse(text, strlen(text), "t.cfg", &cfg));
    return cfg;
}

/* Darknet's defaults and padding rules. */
static void test_values(void **state)
{
    (void)state;
    mk_darknet_cfg_t cfg = parse_ok(NET "[convolutional]\n"                           /* 0: all defaults */
                                        "[convolutional]\nsize=3\npad=1\n"            /* 1: pad=1 -> size/2 */
                                        "[convolutional]\nsize=5\npadding=3\n"        /* 2: explicit padding */
                                        "[convolutional]\nsize=5\npad=1\npadding=3\n" /* 3: pad wins */
                                        "[maxpool]\nsize=2\nstride=1\n"               /* 4: padding size-1 */
                                        "[maxpool]\nstride=2\n"                       /* 5: size = stride */
                                        "[maxpool]\nsize=3\nstride=2\npadding=0\n"    /* 6 */
                                        "[upsample]\n"                                /* 7: stride 2 */
                                        "[route]\nlayers=-1,2,-8\ngroups=2\ngroup_id=1\n" /* 8 */
                                        "[shortcut]\nfrom=-3\nactivation=mish\n");   /* 9 */
    assert_int_equal(cfg.n_layers, 10);
    mk_layer_t *l = cfg.layers;
    assert_int_equal(l[0].type, MK_LAYER_CONV);
    assert_int_equal(l[0].conv.filters, 1);
    assert_int_equal(l[0].conv.size, 1);
    assert_int_equal(l[0].conv.stride, 1);
    assert_int_equal(l[0].conv.pad, 0);
    assert_int_equal(l[0].conv.groups, 1);
    assert_int_equal(l[0].conv.batch_normalize, 0);
    assert_int_equal(l[0].act, MK_ACT_LOGISTIC); /* Darknet's default activation for [convolutional] */
    assert_int_equal(l[0].line, 5);
    assert_int_equal(l[0].input, -1);
    assert_int_equal(l[1].conv.pad, 1);
    assert_int_equal(l[2].conv.pad, 3);
    assert_int_equal(l[3].conv.pad, 2);
    assert_int_equal(l[4].maxpool.pad, 1);
    assert_int_equal(l[5].maxpool.size, 2);
    assert_int_equal(l[5].maxpool.pad, 1);
    assert_int_equal(l[6].maxpool.pad, 0);
    assert_int_equal(l[7].upsample.stride, 2);
    assert_true(l[7].upsample.scale == 1.0f);
    assert_int_equal(l[8].route.n, 3);
    assert_int_equal(l[8].route.layers[0], 7);
    assert_int_equal(l[8].route.layers[1], 2);
    assert_int_equal(l[8].route.layers[2], 0);
    assert_int_equal(l[8].route.groups, 2);
    assert_int_equal(l[8].route.group_id, 1);
    assert_int_equal(l[9].shortcut.from, 6);
    assert_int_equal(l[9].act, MK_ACT_MISH);
    assert_int_equal(l[9].input, 8);
    mk_darknet_cfg_free(&cfg);

    /* [yolo]: the layer's anchors are the mask's pairs; scale_x_y's offset as Darknet computes it. */
    cfg = parse_ok(NET "[yolo]\nmask = 3,4,5\nanchors = 10,14,  23,27,  37,58,  81,82,  135,169,  344,319\n"
                       "classes=80\nnum=6\nscale_x_y = 1.05\n"
                       "[yolo]\nanchors=5,6,7,8\nnum=2\n");
    mk_yolo_t *y = &cfg.layers[0].yolo;
    assert_int_equal(y->meta.n, 3);
    assert_int_equal(y->num, 6);
    assert_int_equal(y->meta.classes, 80);
    const float want[6] = {81, 82, 135, 169, 344, 319};
    for (int k = 0; k < 6; k++)
        assert_true(y->meta.anchors[k] == want[k]);
    assert_true(y->meta.scale_x_y == 1.05f);
    assert_true(y->bias_x_y == (float)(-0.5 * (double)(1.05f - 1.0f)));
    y = &cfg.layers[1].yolo;
    assert_int_equal(y->meta.n, 2); /* no mask: every anchor */
    assert_int_equal(y->meta.classes, 20); /* Darknet's default */
    assert_true(y->meta.anchors[3] == 8.0f);
    assert_true(y->meta.scale_x_y == 1.0f && y->bias_x_y == 0.0f);
    mk_darknet_cfg_free(&cfg);

    /* The activation names. */
    const char *names[] = {"linear", "leaky", "mish", "logistic", "relu"};
    const mk_act_t acts[] = {MK_ACT_LINEAR, MK_ACT_LEAKY, MK_ACT_MISH, MK_ACT_LOGISTIC, MK_ACT_RELU};
    for (int k = 0; k < 5; k++) {
        char text[256];
        snprintf(text, sizeof text, NET "[convolutional]\nactivation=%s\n", names[k]);
        cfg = parse_ok(text);
        assert_int_equal(cfg.layers[0].act, acts[k]);
        assert_string_equal(mk_act_name(acts[k]), names[k]);
        mk_darknet_cfg_free(&cfg);
    }
}

/* The stock and Yolo-Fastest cfgs of the shared data parse; yolov2-tiny stops at its [region] line. */
static void test_shared_cfgs(void **state)
{
    (void)state;
    char dir[4096];
    const char *folders[] = {"models/cfg", "models/yolo-fastest-1.1-body", "models/yolo-fastest-1.1-coco"};
    int parsed = 0, region = 0;
    for (int f = 0; f < 3; f++) {
        if (!tu_data_path(dir, sizeof dir, folders[f]))
            return;
        DIR *d = opendir(dir);
        assert_non_null(d);
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t n = strlen(e->d_name);
            if (n < 5 || strcmp(e->d_name + n - 4, ".cfg"))
                continue;
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            mk_darknet_cfg_t cfg;
            int rc = mk_darknet_cfg_read(path, &cfg);
            if (!strcmp(e->d_name, "yolov2-tiny.cfg")) {
                /* the expected line: where the file says [region] */
                void *text;
                size_t len;
                TU_OK(mk_file_read(path, &text, &len));
                char *at = strstr(text, "[region]"), want[8300];
                assert_non_null(at);
                int line = 1;
                for (char *p = text; p < at; p++)
                    line += *p == '\n';
                free(text);
                snprintf(want, sizeof want, "%s:%d: [region] layers are not supported", path, line);
                assert_int_equal(rc, MK_EUNSUPPORTED);
                if (!strstr(mk_err_msg(), want))
                    fail_msg("%s: '%s' lacks '%s'", e->d_name, mk_err_msg(), want);
                region++;
                continue;
            }
            if (rc)
                fail_msg("%s: %s", e->d_name, mk_err_msg());
            assert_true(cfg.n_layers > 10 && cfg.width > 0 && cfg.height > 0 && cfg.channels == 3);
            print_message("%-28s %3d layers, %dx%d\n", e->d_name, cfg.n_layers, cfg.width, cfg.height);
            mk_darknet_cfg_free(&cfg);
            parsed++;
        }
        closedir(d);
    }
    assert_int_equal(region, 1);
    assert_int_equal(parsed, 9); /* six stock cfgs with [yolo], body, 1.1, 1.1-xl */
}

/* Random mutations of the table's accepted cfgs and of the shared body cfg: each parses or fails with a message
 * that starts with "m.cfg:LINE: ", never a crash (the CI's sanitizer build runs this too). */
static void test_mutations(void **state)
{
    (void)state;
    static const char *const tokens[] = {"[net]\n", "[convolutional]\n", "[route]\n", "[shortcut]\n", "[yolo]\n",
                                         "[maxpool]\n", "[upsample]\n", "[dropout]\n", "layers=", "from=", "mask=",
                                         "anchors=", "filters=", "size=", "stride=", "groups=", "width=", "-1",
                                         "-99", "0", "2147483648", "1e40", "nan", "inf", ",", ",,", "=", "\n", "\r\n"};
    const char *seeds[16];
    size_t seed_len[16];
    int ns = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && ns < 15; i++)
        if (cases[i].code == 0) {
            seeds[ns] = cases[i].text;
            seed_len[ns++] = strlen(cases[i].text);
        }
    void *body = NULL;
    char path[4096];
    const char *rel = "models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.cfg";
    if (tu_data_dir() && tu_data_path(path, sizeof path, rel)) {
        TU_OK(mk_file_read(path, &body, &seed_len[ns]));
        seeds[ns++] = body;
    }
    tu_rng_t rng = {77};
    int ok = 0, bad = 0;
    for (int i = 0; i < 4000; i++) {
        const int k = i % ns;
        size_t n;
        char *m = tu_mutate(&rng, seeds[k], seed_len[k], tokens, (int)(sizeof tokens / sizeof tokens[0]), &n);
        mk_darknet_cfg_t cfg;
        mk_err_clear();
        int rc = mk_darknet_cfg_parse(m, n, "m.cfg", &cfg);
        if (rc == 0) {
            assert_true(cfg.n_layers >= 0);
            mk_darknet_cfg_free(&cfg);
            ok++;
        } else {
            const char *msg = mk_err_msg();
            int line = 0;
            if (sscanf(msg, "m.cfg:%d: ", &line) != 1 || line < 1)
                fail_msg("mutation %d of seed %d: '%s' does not start with m.cfg:LINE:", i, k, msg);
            bad++;
        }
        free(m);
    }
    print_message("mutations: %d parsed, %d refused with file:line\n", ok, bad);
    assert_true(ok > 0 && bad > 0);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_shared_cfgs),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
