"""Word lists of the synthetic tiny corpora.

Mandarin words carry their pinyin because this build of espeak-ng's ``cmn`` voice spells most Hanzi out
as romanisation read in English; the ``cmn-latn-pinyin`` voice reads tone-numbered pinyin properly.
The tones already include third-tone sandhi (``ke2 yi3`` for 可以) so each character always sounds the same
inside its word. The list avoids characters that share both syllable and tone, so the audio determines
the transcript.
"""
from typing import List, Tuple

# (word, space-separated pinyin with tone numbers; 5 = neutral tone): 60 words, 103 distinct characters.
ZH_WORDS: List[Tuple[str, str]] = [
    ("我们", "wo3 men5"), ("今天", "jin1 tian1"), ("明天", "ming2 tian1"), ("每天", "mei3 tian1"),
    ("学校", "xue2 xiao4"), ("老师", "lao3 shi1"), ("学生", "xue2 sheng1"), ("朋友", "peng2 you5"),
    ("电话", "dian4 hua4"), ("中国", "zhong1 guo2"), ("北京", "bei3 jing1"), ("上海", "shang4 hai3"),
    ("工作", "gong1 zuo4"), ("时间", "shi2 jian1"), ("真的", "zhen1 de5"), ("喜欢", "xi3 huan5"),
    ("吃饭", "chi1 fan4"), ("米饭", "mi3 fan4"), ("水果", "shui2 guo3"), ("苹果", "ping2 guo3"),
    ("电脑", "dian4 nao3"), ("手机", "shou3 ji1"), ("飞机", "fei1 ji1"), ("火车", "huo3 che1"),
    ("汽车", "qi4 che1"), ("医院", "yi1 yuan4"), ("银行", "yin2 hang2"), ("东方", "dong1 fang1"),
    ("鞋子", "xie2 zi5"), ("晚上", "wan3 shang5"), ("早上", "zao3 shang5"), ("下午", "xia4 wu3"),
    ("一起", "yi4 qi3"), ("看书", "kan4 shu1"), ("写字", "xie3 zi4"), ("唱歌", "chang4 ge1"),
    ("跑步", "pao3 bu4"), ("开车", "kai1 che1"), ("回家", "hui2 jia1"), ("出去", "chu1 qu4"),
    ("花园", "hua1 yuan2"), ("城里", "cheng2 li3"), ("问题", "wen4 ti2"), ("休息", "xiu1 xi5"),
    ("知道", "zhi1 dao4"), ("可以", "ke2 yi3"), ("动物", "dong4 wu4"), ("因为", "yin1 wei4"),
    ("所以", "suo2 yi3"), ("但是", "dan4 shi4"), ("如果", "ru2 guo3"), ("高兴", "gao1 xing4"),
    ("漂亮", "piao4 liang5"), ("简单", "jian3 dan1"), ("特别", "te4 bie2"), ("马上", "ma3 shang4"),
    ("大家", "da4 jia1"), ("妈妈", "ma1 ma5"), ("爸爸", "ba4 ba5"), ("小狗", "xiao2 gou3"),
]

# 82 common English words, upper case like LibriSpeech transcripts.
EN_WORDS: List[str] = """
THE A AND OF TO IN IS IT YOU HE SHE WE THEY THIS THAT WITH FOR ON AT FROM
BIG SMALL OLD NEW GOOD RED BLUE GREEN BLACK WHITE HAPPY QUICK SLOW LONG
DOG CAT BIRD FISH HORSE HOUSE TREE CAR BOOK WATER MORNING NIGHT DAY SUN MOON STAR
CITY RIVER ROAD DOOR WINDOW TABLE GARDEN SCHOOL TEACHER FRIEND MOTHER FATHER
RUN WALK SEE LOOK OPEN CLOSE READ WRITE SING PLAY EAT DRINK COME GO MAKE TAKE
ALWAYS NEVER TODAY TOMORROW
""".split()

# Candidate homophones for the Mandarin biasing set (wenet_udps/corpora/tiny_biasing.py): common characters none of
# which is in ZH_WORDS. Which of them sound like which training character is not written here: espeak-ng's own
# reading of each character (``espeak-ng -v cmn -x``: syllable and tone) decides.
ZH_HOMOPHONE_CANDIDATES = (
    "门金津巾添名鸣铭美镁笑效孝姥佬诗狮施湿失声升牲鹏蓬棚有酉店垫殿化画划钟忠终帼经晶精惊尚公功攻宫做坐座"
    "石十实食坚尖肩兼珍针贞洗痴嗤范犯贩裹平评瓶萍恼首守鸡基积非菲啡伙气器弃衣依愿怨苑吟寅航冬咚芳协斜携"
    "紫姊碗挽枣蚤夏吓五舞伍启企乞瞰舒叔输梳自畅倡哥鸽割部布簿揩茴蛔佳加嘉初趣哗元原圆源成程诚橙理李礼"
    "提蹄修羞西希溪之枝芝织到盗稻渴已乙椅洞冻栋务雾悟音阴位未味卫围锁索蛋淡弹市事室试儒茹糕羔星姓杏飘"
    "量谅减剪检丹担码玛坝霸晓苟"
)

# English words absent from EN_WORDS, for the English biasing set: letters only, none with J, X or Z (no training
# word has them, so no unit spells them).
EN_ABSENT_WORDS = tuple("""
APPLE BANANA CHERRY GRAPE LEMON MANGO ORANGE PEACH PEAR PLUM MELON CARROT POTATO TOMATO ONION GARLIC PEPPER
CABBAGE CELERY PUMPKIN TURNIP RADISH BUTTER CHEESE BREAD COOKIE MUFFIN PASTA RICE SOUP SALAD SUGAR HONEY
CANDLE BLANKET PILLOW CURTAIN CARPET MIRROR BUCKET BASKET BOTTLE CUPBOARD DRAWER LADDER HAMMER SHOVEL
ANCHOR BARREL BEACON BRIDGE CASTLE CHAPEL CANYON DESERT FOREST GLACIER HARBOR ISLAND MEADOW MOUNTAIN
OCEAN PRAIRIE VALLEY VOLCANO TUNNEL TOWER STATUE TEMPLE PALACE MARKET STADIUM THEATER MUSEUM LIBRARY
RABBIT TURTLE SPIDER BEETLE MONKEY TIGER LION EAGLE FALCON PARROT PENGUIN DOLPHIN WHALE SHARK SALMON
LOBSTER OYSTER BADGER BEAVER OTTER WALRUS CAMEL DONKEY GOAT SHEEP PIGEON SPARROW ROBIN BEAR WOLF MOUSE
VIOLIN GUITAR PIANO TRUMPET FLUTE CELLO DRUMMER BANNER BALLOON ROCKET PLANET COMET ORBIT
SILVER COPPER PLATINUM MARBLE GRANITE CRYSTAL PEBBLE BOULDER CANVAS VELVET COTTON LEATHER RIBBON
BUTTON POCKET SLEEVE COLLAR HELMET GLOVES BOOTS SCARF SANDAL WALLET PURSE TICKET PASSPORT LETTER
PENCIL CRAYON MARKER ERASER RULER STAPLER FOLDER NOTEBOOK CALENDAR CLOCK COMPASS MAGNET BATTERY
ENGINE PISTON TURBINE PROPELLER CABLE SIGNAL ANTENNA MONITOR PRINTER KEYBOARD CAMERA SPEAKER
THUNDER LIGHTNING RAINBOW BLOSSOM MAPLE WILLOW CEDAR BIRCH CACTUS FERN TULIP DAISY LILY ORCHID VIOLET
SUNFLOWER MUSHROOM ACORN PINECONE HARVEST AUTUMN WINTER SPRING SUMMER SUNRISE SUNSET TWILIGHT
DOCTOR NURSE PILOT SAILOR FARMER BAKER BUTCHER PAINTER POET SINGER DANCER WRITER LAWYER BANKER
CAPTAIN SOLDIER GUARD KNIGHT PRINCE PRINCESS KING QUEEN WIDOW ORPHAN STRANGER NEIGHBOR COUSIN UNCLE
AUNT NEPHEW NIECE DAUGHTER BROTHER SISTER GRANDMA GRANDPA BABY TODDLER STUDENT CLERK MERCHANT
PICNIC CARNIVAL PARADE CONCERT FESTIVAL HOLIDAY VACATION BIRTHDAY WEDDING FUNERAL BANQUET PARTY
TRAVEL VOYAGE PILGRIM TOURIST CAMPING FISHING HUNTING SKATING SURFING TENNIS SOCCER HOCKEY CRICKET
BASEBALL GOLF BOWLING CHESS PUPPET PUPPY KITTEN PONY PIGLET LAMB CALF DUCKLING GOSLING CHICKEN
SILENT GENTLE BRAVE CLEVER CLUMSY FRAGILE HUMBLE LOYAL NOBLE POLITE PROUD SHY STUBBORN TIMID WISE
BRIGHT CLOUDY FOGGY STORMY SUNNY WINDY SNOWY RAINY MUDDY DUSTY FROSTY HUMID ICY CHILLY WARM HOT COOL
PURPLE PINK BROWN GOLDEN SCARLET CRIMSON MAGENTA TURQUOISE BEIGE IVORY AMBER OLIVE MAROON NAVY
WHISPER SHOUT GIGGLE LAUGH CRY COUGH YAWN SHIVER TREMBLE WANDER STUMBLE TUMBLE GALLOP GLIDE
CLIMB CRAWL SWIM FLOAT SINK DIVE LEAP HOP SKIP SPIN TWIST BEND STRETCH SPLASH SPRINKLE
BUILD PAINT DRAW CARVE SCULPT KNIT SEW WEAVE STITCH POLISH SCRUB SWEEP MOP DUST WASH RINSE IRON
""".split())
