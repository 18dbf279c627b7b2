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
